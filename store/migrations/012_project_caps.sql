-- Per-project caps (issue 24): an admin's overrides of the deployment's defaults, each
-- endpoint's schema size (what the schema-bytes cap sums), and which endpoint a routing change
-- is about, so edges refetch that endpoint alone.
alter table projects add column limits jsonb not null default '{}';

-- The schema's JSON bytes as the API measures them (core/schema.ts); for rows written before,
-- jsonb's own text, a close stand-in until the endpoint is next saved.
alter table endpoints add column schema_bytes integer not null default 0;
update endpoints set schema_bytes = octet_length(schema::text) where schema is not null;

-- Both set: a change to that one endpoint (created, edited, deleted, a secret rotated). Both
-- null: the project's whole routing state.
alter table changes add column line_key text, add column endpoint_path text;
