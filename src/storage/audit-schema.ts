/**
 * The audit log: one row per action that changes something (submit, rollback, cancel, approve,
 * promote, abort) and per refused sign-in. Append-only: the API has no route to change it, and
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
  `create index if not exists audit_deploy on manent.audit (deploy_id)`,
  `create or replace function manent.audit_append_only() returns trigger language plpgsql as $$
   begin
     raise exception 'manent.audit is append-only: % refused', tg_op using errcode = 'insufficient_privilege';
   end $$`,
  `create or replace trigger audit_no_update before update or delete on manent.audit for each row execute function manent.audit_append_only()`,
  `create or replace trigger audit_no_truncate before truncate on manent.audit for each statement execute function manent.audit_append_only()`,
];
