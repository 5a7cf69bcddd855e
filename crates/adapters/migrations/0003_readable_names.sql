-- Reading the data by hand. Names are stored as UTF-8 bytes (`bytea`), not
-- `text`, because a name may hold any Unicode scalar value (C3), U+0000
-- included, and PostgreSQL's text types cannot store U+0000
-- (0001_collections.sql). In psql a `bytea` shows as hex (`\x6d696c6b`), so
-- these views and this function show names as text, for people only: the
-- service never reads them.
--
--     select * from items_readable where name like 'mil%';
--
-- An expansion only (see README.md in this folder): nothing the previous
-- release uses changes.

-- A name as text. U+0000 becomes U+2400 (SYMBOL FOR NULL, shown as a
-- visible mark) because text cannot hold it; bytes that are not UTF-8 —
-- only a writer other than the service can store those — are shown in
-- psql's own hex form (`\x…`) rather than making the whole query fail.
create function readable_name(name bytea) returns text
    language plpgsql immutable strict parallel safe as $$
declare
    nul integer := position('\x00'::bytea in name);
begin
    if nul = 0 then
        return convert_from(name, 'UTF8');
    end if;
    return convert_from(substring(name for nul - 1), 'UTF8')
        || chr(9216)
        || readable_name(substring(name from nul + 1));
exception when character_not_in_repertoire or untranslatable_character then
    return '\x' || encode(name, 'hex');
end
$$;

create view items_readable as
    select id, readable_name(name) as name
      from items;

create view products_readable as
    select id, readable_name(name) as name, price
      from products;
