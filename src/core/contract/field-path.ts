/**
 * Field paths as drift names them and as an envconfig's `drift.ignore` lists them: names joined by
 * dots (`spec.replicas`), array indexes in brackets (`spec.template.spec.containers[0].image`), a
 * key that is not a plain name as a JSON string in brackets
 * (`metadata.annotations["example.com/owner"]`), and `[*]` for any one index or key.
 */
export type PathSegment = { key: string } | { index: number } | { any: true };

const plainName = /^[A-Za-z_][A-Za-z0-9_-]*$/;

/** A key as a path shows it after `path`: `.name`, or `["other key"]`. */
export function joinPath(path: string, key: string): string {
  if (!plainName.test(key)) return `${path}[${JSON.stringify(key)}]`;
  return path === "" ? key : `${path}.${key}`;
}

/** The segments of a path; a path that does not parse throws an Error saying where and why. */
export function parseFieldPath(path: string): PathSegment[] {
  const out: PathSegment[] = [];
  let i = 0;
  const fail = (why: string): never => {
    throw new Error(
      `${JSON.stringify(path)} is not a field path: ${why} at character ${i + 1} (write spec.replicas, containers[0].image, annotations["example.com/x"], items[*].name)`,
    );
  };
  if (path === "") fail("it is empty");
  // Argo CD's jsonPointers: say how to write the same path here.
  if (path.startsWith("/")) fail(`it is a JSON pointer: write ${JSON.stringify(path.split("/").filter(Boolean).join("."))}`);
  while (i < path.length) {
    const c = path[i]!;
    if (c === "[") {
      i += 1 + readBracket(path.slice(i + 1), out, (why) => fail(why));
      if (i < path.length && path[i] !== "." && path[i] !== "[") fail(`expected "." or "[", found ${JSON.stringify(path[i])}`);
      continue;
    }
    if (c === ".") {
      if (out.length === 0) fail('it starts with "."');
      i++;
    }
    const m = /^[A-Za-z_][A-Za-z0-9_-]*/.exec(path.slice(i));
    if (!m) fail(path[i] === undefined ? 'it ends with "."' : `expected a name, found ${JSON.stringify(path[i])}`);
    out.push({ key: m![0] });
    i += m![0].length;
    if (i < path.length && path[i] !== "." && path[i] !== "[") fail(`expected "." or "[", found ${JSON.stringify(path[i])}`);
  }
  return out;
}

/** Reads what follows a "[" (an index, `*`, or a quoted key, then "]") into `out`; returns how many characters it took. */
function readBracket(rest: string, out: PathSegment[], fail: (why: string) => never): number {
  if (rest.startsWith('"')) {
    // A quoted key may hold "]": read the JSON string up to its closing quote.
    const str = /^"(?:[^"\\]|\\.)*"/.exec(rest);
    if (!str || rest[str[0].length] !== "]") return fail("a quoted key must be a JSON string followed by ]");
    try {
      out.push({ key: JSON.parse(str[0]) as string });
    } catch {
      return fail("a quoted key must be a JSON string");
    }
    return str[0].length + 1;
  }
  const end = rest.indexOf("]");
  if (end < 0) return fail('"[" is not closed');
  const inner = rest.slice(0, end);
  if (inner === "*") out.push({ any: true });
  else if (/^(0|[1-9][0-9]{0,8})$/.test(inner)) out.push({ index: Number(inner) });
  else return fail('expected an index, "*" or a quoted key in brackets');
  return end + 1;
}

/** True when `path` (concrete: no `[*]`) is `pattern` or lies under it (`spec.template` covers `spec.template.spec.containers[0].image`). */
export function pathCovers(pattern: readonly PathSegment[], path: readonly PathSegment[]): boolean {
  if (path.length < pattern.length) return false;
  return pattern.every((p, i) => segmentMatches(p, path[i]!));
}

function segmentMatches(p: PathSegment, s: PathSegment): boolean {
  if ("any" in p) return true;
  if ("key" in p) return "key" in s && s.key === p.key;
  return "index" in s && s.index === p.index;
}

/** The path as text (the syntax {@link parseFieldPath} reads). */
export function formatFieldPath(path: readonly PathSegment[]): string {
  let out = "";
  for (const s of path) {
    if ("any" in s) out += "[*]";
    else if ("index" in s) out += `[${s.index}]`;
    else out = joinPath(out, s.key);
  }
  return out;
}
