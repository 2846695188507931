/**
 * The audit log: one row per action that changes something (submit, rollback, cancel, approve,
 * promote, abort, plugin restart) and per refused sign-in, naming who acted (kind, id, name,
 * e-mail and groups of the principal). Append-only: the API has no route to change it, and
 * triggers refuse UPDATE, DELETE and TRUNCATE to anyone, so a bug or a SQL injection cannot rewrite it.
 */
export const auditStatements = [
  `create table if not exists manent.audit (
     id bigserial primary key,
     at timestamptz not null default clock_timestamp(),
     actor text,
     tenant text,
     action text not null,
     deploy_id text,
     outcome text not null,
     message text,
     client_address text
   )`,
  `create index if not exists audit_tenant on manent.audit (tenant, id desc)`,
  // Who acted, as a principal (issue 19), and where: added columns, so rows written before keep their
  // actor name and read as null here.
  `alter table manent.audit add column if not exists actor_kind text`,
  `alter table manent.audit add column if not exists actor_id text`,
  `alter table manent.audit add column if not exists actor_email text`,
  `alter table manent.audit add column if not exists actor_groups jsonb`,
  `alter table manent.audit add column if not exists application text`,
  `alter table manent.audit add column if not exists environment text`,
  `create index if not exists audit_deploy on manent.audit (deploy_id)`,
  // The one delete allowed: the retention sweep's, of entries it exported first (pg-retention.ts
  // sets manent.audit_exported in the deleting statement's own transaction).
  `create or replace function manent.audit_append_only() returns trigger language plpgsql as $$
   begin
     if tg_op = 'DELETE' and current_setting('manent.audit_exported', true) = 'on' then
       return old;
     end if;
     raise exception 'manent.audit is append-only: % refused', tg_op using errcode = 'insufficient_privilege';
   end $$`,
  `create or replace trigger audit_no_update before update or delete on manent.audit for each row execute function manent.audit_append_only()`,
  `create or replace trigger audit_no_truncate before truncate on manent.audit for each statement execute function manent.audit_append_only()`,
];
