/**
 * Managed API tokens (created, listed and revoked through the API, unlike manent.yml's): one row
 * per token, revoked tokens kept so the audit log's names stay meaningful and a name is never
 * reused. Only the sha256 of a token's value is stored; the value is shown once, at creation.
 */
export const tokenStatements = [
  `create table if not exists manent.api_tokens (
     id text primary key,
     name text not null unique,
     role text not null,
     tenant text not null,
     application text not null,
     environment text not null,
     secret_sha256 bytea not null unique,
     created_at timestamptz not null default now(),
     created_by_id text not null,
     created_by_name text not null,
     expires_at timestamptz not null,
     last_used_at timestamptz,
     revoked_at timestamptz,
     revoked_by_id text,
     revoked_by_name text
   )`,
  `create index if not exists api_tokens_created on manent.api_tokens (created_at desc)`,
];
