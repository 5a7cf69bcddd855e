-- The change feed (C14): every committed change to items, in commit order,
-- for subscribers in every process that opens this file. An expansion
-- only (see ../migrations/README.md): a new table, a new row and new
-- triggers; nothing the previous release reads or writes changes (its
-- writes get recorded too, by the triggers).
--
-- Triggers write each change in the same transaction as the write itself,
-- so a change is committed exactly when its write is, and a write rolled
-- back leaves none. SQLite has one writer at a time and `position` is an
-- `AUTOINCREMENT` key, so position order is commit order, and a position
-- is never handed out twice, also after the oldest rows are pruned.
--
-- `at` is the writer's clock in Unix milliseconds: the retention
-- (`CHANGES_RETENTION`) prunes the oldest rows by it, a few per write
-- batch, and subscribers' lag is measured from it.
create table changes (
    position integer primary key autoincrement,
    kind     text not null check (kind in ('created', 'replaced', 'deleted')),
    item_id  integer not null,
    -- The item's name after the change; null for `deleted`.
    name     blob check ((kind = 'deleted') = (name is null)),
    at       integer not null
);

-- One row: this store's random origin, which every cursor names (so a
-- cursor of another store, or of a copy, is unknown here and gets a
-- reset), and the last position pruned: a cursor at or above it resumes,
-- one below it is older than the retention.
create table change_log (
    one            integer primary key check (one = 1),
    origin         text not null,
    pruned_through integer not null
);

insert into change_log (one, origin, pruned_through)
values (1, lower(hex(randomblob(8))), 0);

create trigger items_change_insert after insert on items
begin
    insert into changes (kind, item_id, name, at)
    values ('created', new.id, new.name, cast(unixepoch('subsec') * 1000 as integer));
end;

create trigger items_change_update after update on items
begin
    insert into changes (kind, item_id, name, at)
    values ('replaced', new.id, new.name, cast(unixepoch('subsec') * 1000 as integer));
end;

create trigger items_change_delete after delete on items
begin
    insert into changes (kind, item_id, name, at)
    values ('deleted', old.id, null, cast(unixepoch('subsec') * 1000 as integer));
end;
