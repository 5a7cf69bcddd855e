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

-- One statement trigger per kind of write records the change and keeps
-- the tally of 0002 (which it replaces): one call of PL/pgSQL and one
-- transition table a statement instead of two. Measured with `pgbench`
-- (docs/performance.md, "The change feed"): a create cost the database
-- about a third more with the two triggers side by side, a fifth with one.
-- The change is inserted first, so a writer takes its position before it
-- may wait for its tally slot's row lock.
create function items_record_changes() returns trigger language plpgsql as $$
declare
    changed bigint;
    sign bigint := case tg_op when 'INSERT' then 1 when 'DELETE' then -1 else 0 end;
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
    get diagnostics changed = row_count;
    if changed > 0 then
        update item_tally
           set items = items + sign * changed,
               writes = writes + changed
         where slot = pg_backend_pid() % 16;
    end if;
    return null;
end
$$;

-- contract: no statement of any release names these triggers, and the
-- migration's one transaction creates the trigger that keeps the tally
-- in their place, so no write goes uncounted.
drop trigger items_tally_insert on items;
-- contract: as above.
drop trigger items_tally_update on items;
-- contract: as above.
drop trigger items_tally_delete on items;

create trigger items_changes_insert after insert on items
    referencing new table as new_rows
    for each statement execute function items_record_changes();
create trigger items_changes_update after update on items
    referencing new table as new_rows
    for each statement execute function items_record_changes();
create trigger items_changes_delete after delete on items
    referencing old table as old_rows
    for each statement execute function items_record_changes();
