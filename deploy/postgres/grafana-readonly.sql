-- A read-only PostgreSQL role for Grafana's driftwarden datasource (docs/deploy.md, "Dashboards").
-- Run it once as the owner of driftwarden's tables (the role the job and the alert worker log in as):
--
--   DRIFTWARDEN_GRAFANA_PG_PASSWORD=... psql "postgresql://driftwarden@db/driftwarden" -f grafana-readonly.sql
--
-- The password is read from the environment (psql's \getenv), never from this file or a command line.
-- psql variables (-v name=value) change the defaults: role (driftwarden_grafana), schema (public).
-- The role can log in, read every driftwarden table (and those the owner creates later), and nothing else:
-- its sessions are read-only, and it owns nothing. Running the file again sets the password again.

\set ON_ERROR_STOP on
\if :{?role} \else \set role driftwarden_grafana \endif
\if :{?schema} \else \set schema public \endif
\getenv password DRIFTWARDEN_GRAFANA_PG_PASSWORD
\if :{?password} \else
  DO $$ BEGIN RAISE EXCEPTION 'set DRIFTWARDEN_GRAFANA_PG_PASSWORD to the password of the Grafana role'; END $$;
\endif

SELECT NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'role') AS role_is_new \gset
\if :role_is_new
  CREATE ROLE :"role" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
\endif
ALTER ROLE :"role" WITH LOGIN PASSWORD :'password';
ALTER ROLE :"role" SET default_transaction_read_only = on;
SELECT current_database() AS database \gset
GRANT CONNECT ON DATABASE :"database" TO :"role";
GRANT USAGE ON SCHEMA :"schema" TO :"role";
GRANT SELECT ON ALL TABLES IN SCHEMA :"schema" TO :"role";
ALTER DEFAULT PRIVILEGES IN SCHEMA :"schema" GRANT SELECT ON TABLES TO :"role";
