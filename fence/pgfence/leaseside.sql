-- leaseside fencing for PostgreSQL (9.5 or later), version 1.
--
-- Install once per database, as a role that may create a schema there:
--     leaseside fence postgres install postgres://...    (or)
--     psql "$URL" -v ON_ERROR_STOP=1 -f leaseside.sql
-- Installing again is harmless (it replaces the functions, keeps the tokens).
--
-- Use: call leaseside.fence(lease, token) in the transaction of the write it
-- guards, before the write:
--     BEGIN;
--     SELECT leaseside.fence('jobs/nightly', 42);
--     UPDATE accounts SET ... ;
--     COMMIT;
-- fence locks the lease's row until the transaction ends, so fenced writes
-- of one lease take turns, and either refuses the token, raising SQLSTATE
-- LS001 (which aborts the transaction: the write is undone with it), or
-- records it as the lease's highest. A token equal to the highest passes (a
-- holder writes many times under one token). Under REPEATABLE READ or
-- SERIALIZABLE a concurrent fence of the same lease may end in a
-- serialization failure (40001) instead, retried as any other.
--
-- Errors fence raises:
--   LS001  the token is below the highest seen for the lease; the message
--          names both ("stale token T for lease 'L': highest seen H"), the
--          detail says lease=L token=T highest=H.
--   22004  lease or token is NULL.
--   22023  lease is empty or longer than 1024 bytes, or token is negative.

BEGIN;

CREATE SCHEMA IF NOT EXISTS leaseside;
COMMENT ON SCHEMA leaseside IS 'leaseside fencing, version 1: leaseside.fence(lease, token)';

-- The highest token each lease's writes have carried. Writers never touch
-- it: only leaseside.fence (SECURITY DEFINER) writes it, so a writer cannot
-- lower a token.
CREATE TABLE IF NOT EXISTS leaseside.tokens (
    lease   text PRIMARY KEY,
    highest bigint NOT NULL CHECK (highest >= 0),
    updated timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON leaseside.tokens FROM PUBLIC;

CREATE OR REPLACE FUNCTION leaseside.fence(lease text, token bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    seen bigint;
BEGIN
    IF lease IS NULL OR token IS NULL THEN
        RAISE EXCEPTION 'leaseside.fence: lease and token must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF lease = '' OR octet_length(lease) > 1024 THEN
        RAISE EXCEPTION 'leaseside.fence: lease name must be 1 to 1024 bytes, not %', octet_length(lease)
            USING ERRCODE = '22023';
    END IF;
    IF token < 0 THEN
        RAISE EXCEPTION 'leaseside.fence: token % is negative', token USING ERRCODE = '22023';
    END IF;
    -- FOR UPDATE holds the lease's row until this transaction ends. A
    -- lease's first fence makes the row (waiting for another transaction's
    -- insert of it, if any) and then takes it the same way.
    SELECT t.highest INTO seen FROM leaseside.tokens AS t WHERE t.lease = fence.lease FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO leaseside.tokens AS t (lease, highest) VALUES (fence.lease, 0)
            ON CONFLICT ON CONSTRAINT tokens_pkey DO NOTHING;
        SELECT t.highest INTO seen FROM leaseside.tokens AS t WHERE t.lease = fence.lease FOR UPDATE;
    END IF;
    IF token < seen THEN
        RAISE EXCEPTION 'stale token % for lease %: highest seen %', token, quote_literal(lease), seen
            USING ERRCODE = 'LS001',
                  DETAIL = format('lease=%s token=%s highest=%s', lease, token, seen),
                  HINT = 'the writer lost its lease; a newer holder has written since';
    END IF;
    IF token > seen THEN
        UPDATE leaseside.tokens AS t SET highest = token, updated = now() WHERE t.lease = fence.lease;
    END IF;
    RETURN seen;
END
$fn$;
COMMENT ON FUNCTION leaseside.fence(text, bigint) IS
    'Refuses (SQLSTATE LS001) a token below the highest seen for the lease, else records it; returns the previous highest (0: none). Call it in the transaction of the write it guards.';

CREATE OR REPLACE FUNCTION leaseside.highest(lease text) RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$ SELECT coalesce((SELECT t.highest FROM leaseside.tokens AS t WHERE t.lease = highest.lease), 0) $fn$;
COMMENT ON FUNCTION leaseside.highest(text) IS 'The highest token leaseside.fence has recorded for the lease (0: none).';

GRANT USAGE ON SCHEMA leaseside TO PUBLIC;
GRANT EXECUTE ON FUNCTION leaseside.fence(text, bigint), leaseside.highest(text) TO PUBLIC;

COMMIT;
