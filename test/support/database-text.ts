import pg from "pg";

/** Every row of every table of a database, as text: to search a whole database for what must not be in it. */
export async function databaseText(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows: tables } = await client.query<{ schema: string; name: string }>(
      `select table_schema as schema, table_name as name from information_schema.tables
       where table_type = 'BASE TABLE' and table_schema not in ('pg_catalog', 'information_schema')`,
    );
    const parts: string[] = [];
    for (const t of tables) {
      const { rows } = await client.query<{ row: string }>(
        `select t::text as row from ${client.escapeIdentifier(t.schema)}.${client.escapeIdentifier(t.name)} t`,
      );
      parts.push(`-- ${t.schema}.${t.name}`, ...rows.map((r) => r.row));
    }
    return parts.join("\n");
  } finally {
    await client.end();
  }
}
