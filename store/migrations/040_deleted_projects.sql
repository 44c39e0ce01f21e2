-- Projects deleted (store/project-erase.ts): a slug once deleted is not given out again, so no new
-- project takes the name its Temporal histories were searched by while they are deleted.
create table deleted_projects (
  slug text primary key,
  deleted_at timestamptz not null
);
