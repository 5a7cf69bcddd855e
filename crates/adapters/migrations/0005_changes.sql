-- The change feed (C14): every committed change to items, with a position
-- in an order every instance agrees on. An expansion only (see README.md
-- in this folder): new tables, a row, functions and triggers; the previous
-- release's statements work unchanged (and their writes are recorded too).
--
-- Statement-level triggers write the changes in the same transaction as
-- each write, one `insert` per statement whatever the number of rows (a
-- coalesced batch of creates pays once): no round trip is added, a change
-- commits exactly when its write does, and a write rolled back leaves none.
-- The transition table yields rows in the order the statement wrote them
-- (a batch of creates: id order), so the positions follow it; no sort.
--
-- Positions come from the identity's sequence, taken by the trigger after
-- the statement wrote its rows: a write that waited for another's row lock
-- takes its position after that one committed, so each item's changes are
-- in commit order. Sequence values alone are not commit order across
-- items (a transaction may take 12, another 13 and commit first), so a
-- reader publishes a position only once no transaction that may hold a
-- lower one is still running: it reads the sequence's last value, then
-- the running transactions (`pg_current_snapshot()`), and waits until all
-- of those have ended (crates/adapters/src/postgres/changes.rs). Nothing
-- here serialises writers.
--
-- `at` is the transaction's start: the retention (`CHANGES_RETENTION`)
-- prunes the oldest rows by it, and subscribers' lag is measured from it.
create table changes (
    position bigint generated always as identity primary key,
    kind     text not null check (kind in ('created', 'replaced', 'deleted')),
    item_id  bigint not null,
    -- The item's name after the change; null for `deleted`.
    name     bytea check ((kind = 'deleted') = (name is null)),
    at       timestamptz not null default now()
);

-- One row: this database's random origin, which every cursor names (so a
-- cursor of another database, or of a copy, is unknown here and gets a
-- reset), and the last position pruned: a cursor at or above it resumes,
-- one below it is older than the retention.
create table change_log (
    one            smallint primary key check (one = 1),
    origin         text not null,
    pruned_through bigint not null
);

insert into change_log (one, origin, pruned_through)
values (1, left(md5(random()::text || clock_timestamp()::text), 16), 0);

create function items_record_changes() returns trigger language plpgsql as $$
begin
    if tg_op = 'INSERT' then
        insert into changes (kind, item_id, name)
        select 'created', id, name from new_rows;
    elsif tg_op = 'UPDATE' then
        insert into changes (kind, item_id, name)
        select 'replaced', id, name from new_rows;
    else
        insert into changes (kind, item_id, name)
        select 'deleted', id, null from old_rows;
    end if;
    return null;
end
$$;

create trigger items_changes_insert after insert on items
    referencing new table as new_rows
    for each statement execute function items_record_changes();
create trigger items_changes_update after update on items
    referencing new table as new_rows
    for each statement execute function items_record_changes();
create trigger items_changes_delete after delete on items
    referencing old table as old_rows
    for each statement execute function items_record_changes();
