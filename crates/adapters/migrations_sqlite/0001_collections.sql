-- The service's three collections in a SQLite file, mirroring the
-- PostgreSQL schema (crates/adapters/migrations). Every constraint repeats a
-- domain rule (C2, C3) so that a second writer — another process, a person
-- at the sqlite3 shell — cannot store what the service would refuse.

-- AUTOINCREMENT: ids come from the counter in `sqlite_sequence`, which only
-- grows, so an id is never handed out twice, also after deletes and across
-- restarts (C2). A plain `integer primary key` would reuse the largest id
-- once it was deleted.
-- Names are UTF-8 bytes (a blob): a name may hold any Unicode scalar value,
-- U+0000 included (C3), and a blob compares byte by byte, as `name=X` must.
-- The domain counts characters; here 1 to 1024 bytes (256 × at most 4).
create table items (
    id   integer primary key autoincrement,
    name blob not null check (typeof(name) = 'blob' and length(name) between 1 and 1024)
);

-- `?name=X` lists items named X in id order and counts them (C10): this
-- index answers both reading only the entries so named.
create index items_name_id on items (name, id);

create table products (
    id    integer primary key autoincrement,
    name  blob not null check (typeof(name) = 'blob' and length(name) between 1 and 1024),
    price real not null check (price >= 0 and price <= 1.7976931348623157e308)
);

-- Read-only: the two users of C4, with fixed ids.
create table users (
    id   integer primary key,
    name text not null
);

insert into users (id, name) values (1, 'John Doe'), (2, 'Jane Doe');

-- X-Total-Count without counting the table (C10), and the listing's version
-- (C7): one row, changed by the triggers below in the same transaction as
-- every insert, update and delete, so a reader sees exactly the count its
-- snapshot sees, whoever wrote the rows. SQLite has one writer at a time, so
-- one row (unlike PostgreSQL's 16 slots) costs no contention.
--
-- `version` grows by one on every row written. It starts at a random point
-- below 2^62, as the in-memory store's does: two files holding different
-- items after the same number of writes still give different versions, so
-- an ETag from one never matches a listing of the other. It is stored, so a
-- restart keeps it.
create table item_tally (
    one     integer primary key check (one = 1),
    items   integer not null check (items >= 0),
    version integer not null
);

insert into item_tally (one, items, version)
values (1, 0, abs(random() % 4611686018427387904));

create trigger items_tally_insert after insert on items
begin
    update item_tally set items = items + 1, version = version + 1;
end;

create trigger items_tally_update after update on items
begin
    update item_tally set version = version + 1;
end;

create trigger items_tally_delete after delete on items
begin
    update item_tally set items = items - 1, version = version + 1;
end;
