/** A filter: a text field, or a choice among `options` ("" is "any"). */
export interface Filter<K extends string> {
  name: K;
  label: string;
  options?: readonly string[];
}

/**
 * The one filter bar of the list pages. A text filter applies when it changes (Enter or leaving
 * the field), a choice at once; values are trimmed. The page decides what a filter means (a query
 * of the API, or a match on what is shown).
 */
export function FilterBar<K extends string>({
  filters,
  value,
  onChange,
}: {
  filters: Filter<K>[];
  value: Record<K, string>;
  onChange: (next: Record<K, string>) => void;
}) {
  const set = (name: K, v: string) => onChange({ ...value, [name]: v.trim() });
  return (
    <form class="filters" aria-label="filters" role="search" onSubmit={(e) => e.preventDefault()}>
      {filters.map((f) => (
        <label key={f.name}>
          {f.label}
          {f.options ? (
            <select value={value[f.name]} onChange={(e) => set(f.name, e.currentTarget.value)}>
              {["", ...f.options].map((o) => (
                <option value={o}>{o === "" ? "any" : o.replace(/_/g, " ")}</option>
              ))}
            </select>
          ) : (
            <input type="search" value={value[f.name]} onChange={(e) => set(f.name, e.currentTarget.value)} />
          )}
        </label>
      ))}
    </form>
  );
}

/** Keeps the filters that have a value, as a query string's entries. */
export function filterQuery(values: Record<string, string>, extra: Record<string, string> = {}): string {
  return new URLSearchParams(Object.entries({ ...values, ...extra }).filter(([, v]) => v !== "")).toString();
}
