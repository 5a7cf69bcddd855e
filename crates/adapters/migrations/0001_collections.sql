-- The service's three collections. SQL is lowercase; every constraint
-- repeats a domain rule (C2, C3) so that a second writer — another
-- instance, a person at psql — cannot store what the service would refuse.

-- Ids come from an identity column: nextval() is atomic across sessions and
-- never hands out a value twice, so ids are unique and never reused, even
-- after deletes and with many instances inserting at once (C2). A failed
-- insert burns its value: gaps are possible, reuse is not.
-- Names are UTF-8 bytes, not `text`: a name may hold any Unicode scalar
-- value (C3), U+0000 included, which PostgreSQL's text types cannot store.
-- The domain counts characters; here 1 to 1024 bytes (256 × at most 4) is the
-- bound that needs no decoding.
create table items (
    id   bigint generated always as identity primary key,
    name bytea not null check (octet_length(name) between 1 and 1024)
);

-- `?name=X` lists items named X in id order and counts them (C10): this
-- index answers both without touching other rows.
create index items_name_id on items (name, id);

create table products (
    id    bigint generated always as identity primary key,
    name  bytea not null check (octet_length(name) between 1 and 1024),
    price double precision not null check (price >= 0 and price < 'Infinity')
);

-- Read-only: the two users of C4, with fixed ids.
create table users (
    id   bigint primary key,
    name text not null
);

insert into users (id, name) values (1, 'John Doe'), (2, 'Jane Doe');
