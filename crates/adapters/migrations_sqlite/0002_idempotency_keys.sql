-- Idempotency keys of POST /items and POST /products (C7). A keyed create
-- stores its key here in the same transaction as the row, with the values
-- the row was created with, so a retry replays the first response — also
-- after a restart, and after the row was renamed or deleted. Items and
-- products have a table each: a key of one never answers for the other.
--
-- `created_at` is the creating service's clock in Unix milliseconds. Keys
-- older than 24 hours are ignored by lookups and may be reused; each keyed
-- create removes a few of them through the `created_at` index, oldest
-- first, so no create scans the table.
create table item_keys (
    key        text primary key check (length(key) between 1 and 255),
    created_at integer not null,
    item_id    integer not null,
    name       blob not null check (typeof(name) = 'blob' and length(name) between 1 and 1024)
) without rowid;

create index item_keys_created_at on item_keys (created_at);

create table product_keys (
    key        text primary key check (length(key) between 1 and 255),
    created_at integer not null,
    product_id integer not null,
    name       blob not null check (typeof(name) = 'blob' and length(name) between 1 and 1024),
    price      real not null check (price >= 0 and price <= 1.7976931348623157e308)
) without rowid;

create index product_keys_created_at on product_keys (created_at);
