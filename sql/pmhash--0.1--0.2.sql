/* sql/pmhash--0.1--0.2.sql: update of the pmhash extension from 0.1 to 0.2 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pmhash UPDATE TO '0.2'" to load this file. \quit

-- Equality moves from operator number 1 to 3, btree's number, under which
-- PostgreSQL 15's logical replication apply worker looks up the equality of
-- a replica identity index.  An operator class's own operators cannot be
-- dropped and re-added while indexes use the class, so the extension's
-- families are renumbered in place; pmhash accepts both numbers, and no
-- index, plan or file depends on the number.  Operator families created
-- outside the extension keep number 1 (ALTER OPERATOR FAMILY can move them).
UPDATE pg_catalog.pg_amop o
   SET amopstrategy = 3
 WHERE o.amopstrategy = 1
   AND o.amopmethod = (SELECT a.oid FROM pg_catalog.pg_am a WHERE a.amname = 'pmhash')
   AND EXISTS (SELECT FROM pg_catalog.pg_depend d
               WHERE d.classid = 'pg_catalog.pg_opfamily'::pg_catalog.regclass
                 AND d.objid = o.amopfamily
                 AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
                 AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e
                                   WHERE e.extname = 'pmhash')
                 AND d.deptype = 'e');
