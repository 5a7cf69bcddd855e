-- Idempotency keys of POST /items and POST /products (C7). A keyed create
-- stores its key here in the same transaction as the row, with the values
-- the row was created with, so a retry replays the first response — on any
-- instance, after a restart, and after the row was renamed or deleted.
-- Items and products have a table each: a key of one never answers for the
-- other. The primary key is what makes a second instance's create with the
-- same key wait for the first and then replay it, instead of creating again.
--
-- `created_at` is the creating instance's clock in Unix milliseconds. Keys
-- older than 24 hours are ignored by lookups and may be reused; each keyed
-- create removes a few of them through the `created_at` index, oldest
-- first, so no create scans the table.
--
-- An expansion only (see README.md in this folder): two new tables, which
-- the previous release never reads.
create table item_keys (
    key        text primary key check (octet_length(key) between 1 and 255),
    created_at bigint not null,
    item_id    bigint not null,
    name       bytea not null check (octet_length(name) between 1 and 1024)
);

create index item_keys_created_at on item_keys (created_at);

create table product_keys (
    key        text primary key check (octet_length(key) between 1 and 255),
    created_at bigint not null,
    product_id bigint not null,
    name       bytea not null check (octet_length(name) between 1 and 1024),
    price      double precision not null check (price >= 0 and price < 'Infinity')
);

create index product_keys_created_at on product_keys (created_at);
