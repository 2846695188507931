/**
 * The condition language of analysis checks (`success_condition: result < 0.05`): comparisons of
 * `result` with literals, joined by and/or/not and parentheses. It is parsed by hand into a small
 * tree and evaluated by walking it, never with eval/Function, so an envconfig cannot run code.
 *
 *   condition  := or
 *   or         := and (("or" | "||") and)*
 *   and        := unary (("and" | "&&") unary)*
 *   unary      := ("not" | "!") unary | comparison
 *   comparison := operand (("<" | "<=" | ">" | ">=" | "==" | "!=") operand)?
 *   operand    := number | string | true | false | null | result | "(" or ")"
 */

export type CompareOp = "<" | "<=" | ">" | ">=" | "==" | "!=";
export type ConditionValue = number | string | boolean | null;

export type ConditionNode =
  | { type: "literal"; value: ConditionValue }
  | { type: "result" }
  | { type: "not"; operand: ConditionNode }
  | { type: "logical"; op: "and" | "or"; left: ConditionNode; right: ConditionNode }
  | { type: "compare"; op: CompareOp; left: ConditionNode; right: ConditionNode };

/** What `result` holds: a number (Prometheus) or any JSON scalar (an HTTP check's JSON field). */
export type ResultKind = "number" | "json";

/** A condition that cannot be parsed or cannot apply to its check; the message says where and why. */
export class ConditionError extends Error {
  override readonly name = "ConditionError";
}

/** Longest condition accepted: conditions are one-liners, a longer text is a mistake or an attack. */
export const maxConditionLength = 500;

type Token =
  | { kind: "number"; value: number; at: number }
  | { kind: "string"; value: string; at: number }
  | { kind: "word"; value: string; at: number }
  | { kind: "op"; value: string; at: number }
  | { kind: "end"; at: number };

const operators = ["<=", ">=", "==", "!=", "&&", "||", "<", ">", "!", "(", ")"];
const numberPattern = /^-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?/;
const wordPattern = /^[A-Za-z_][A-Za-z0-9_]*/;

function tokenize(source: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < source.length) {
    const ch = source[i]!;
    if (/\s/.test(ch)) {
      i++;
      continue;
    }
    const rest = source.slice(i);
    const num = numberPattern.exec(rest);
    if (num) {
      tokens.push({ kind: "number", value: Number(num[0]), at: i });
      i += num[0].length;
      continue;
    }
    const word = wordPattern.exec(rest);
    if (word) {
      tokens.push({ kind: "word", value: word[0], at: i });
      i += word[0].length;
      continue;
    }
    if (ch === '"' || ch === "'") {
      const [value, length] = readString(source, i);
      tokens.push({ kind: "string", value, at: i });
      i += length;
      continue;
    }
    const op = operators.find((o) => rest.startsWith(o));
    if (op) {
      tokens.push({ kind: "op", value: op, at: i });
      i += op.length;
      continue;
    }
    if (ch === "=") throw syntax(i, 'unexpected "=" (compare with "==")');
    throw syntax(i, `unexpected ${JSON.stringify(ch)}`);
  }
  tokens.push({ kind: "end", at: source.length });
  return tokens;
}

function readString(source: string, start: number): [string, number] {
  const quote = source[start]!;
  let value = "";
  for (let i = start + 1; i < source.length; i++) {
    const ch = source[i]!;
    if (ch === quote) return [value, i - start + 1];
    if (ch === "\\") {
      const next = source[++i];
      if (next === undefined) break;
      const escapes: Record<string, string> = { n: "\n", t: "\t", "\\": "\\", '"': '"', "'": "'" };
      const escaped = escapes[next];
      if (escaped === undefined) throw syntax(i - 1, `unknown escape "\\${next}" in a string`);
      value += escaped;
    } else {
      value += ch;
    }
  }
  throw syntax(start, "unterminated string");
}

function syntax(at: number, message: string): ConditionError {
  return new ConditionError(`${message} at column ${at + 1}`);
}

class Parser {
  private pos = 0;
  constructor(private readonly tokens: Token[]) {}

  parse(): ConditionNode {
    const node = this.or();
    const next = this.peek();
    if (next.kind !== "end") throw syntax(next.at, `unexpected ${describeToken(next)}`);
    return node;
  }

  private peek(): Token {
    return this.tokens[this.pos]!;
  }

  private accept(...values: string[]): (Token & { kind: "op" | "word" }) | undefined {
    const t = this.peek();
    if ((t.kind === "op" || t.kind === "word") && values.includes(t.value)) {
      this.pos++;
      return t;
    }
    return undefined;
  }

  private or(): ConditionNode {
    let left = this.and();
    while (this.accept("or", "||")) left = { type: "logical", op: "or", left, right: this.and() };
    return left;
  }

  private and(): ConditionNode {
    let left = this.unary();
    while (this.accept("and", "&&")) left = { type: "logical", op: "and", left, right: this.unary() };
    return left;
  }

  private unary(): ConditionNode {
    if (this.accept("not", "!")) return { type: "not", operand: this.unary() };
    return this.comparison();
  }

  private comparison(): ConditionNode {
    const left = this.operand();
    const op = this.accept("<", "<=", ">", ">=", "==", "!=");
    if (!op) return left;
    const right = this.operand();
    const chained = this.accept("<", "<=", ">", ">=", "==", "!=");
    if (chained) throw syntax(chained.at, `comparisons cannot be chained (join them with "and")`);
    return { type: "compare", op: op.value as CompareOp, left, right };
  }

  private operand(): ConditionNode {
    const t = this.peek();
    this.pos++;
    switch (t.kind) {
      case "number":
      case "string":
        return { type: "literal", value: t.value };
      case "op":
        if (t.value === "(") {
          const inner = this.or();
          const close = this.peek();
          if (!this.accept(")")) throw syntax(close.at, `expected ")" but found ${describeToken(close)}`);
          return inner;
        }
        break;
      case "word":
        if (t.value === "result") return { type: "result" };
        if (t.value === "true" || t.value === "false") return { type: "literal", value: t.value === "true" };
        if (t.value === "null") return { type: "literal", value: null };
        if (["and", "or", "not"].includes(t.value)) break;
        throw syntax(t.at, `unknown name "${t.value}" (the measured value is "result")`);
      case "end":
        throw syntax(t.at, "unexpected end of condition");
    }
    throw syntax(t.at, `unexpected ${describeToken(t)}`);
  }
}

function describeToken(t: Token): string {
  switch (t.kind) {
    case "end":
      return "end of condition";
    case "string":
      return `string ${JSON.stringify(t.value)}`;
    default:
      return `"${t.value}"`;
  }
}

/** Parses a condition; throws {@link ConditionError} naming the column and the reason. */
export function parseCondition(source: string): ConditionNode {
  if (source.length > maxConditionLength) throw new ConditionError(`longer than ${maxConditionLength} characters`);
  if (source.trim() === "") throw new ConditionError("is empty");
  return new Parser(tokenize(source)).parse();
}

/**
 * Refuses conditions that parse but cannot mean what their author wants: one that never reads
 * `result`, a comparison used as a value, an ordering of non-numbers, a number result compared
 * with a string. Throws {@link ConditionError}.
 */
export function checkCondition(node: ConditionNode, kind: ResultKind): void {
  if (!readsResult(node)) throw new ConditionError('never reads "result", the measured value');
  checkBoolean(node, kind);
}

function readsResult(node: ConditionNode): boolean {
  switch (node.type) {
    case "result":
      return true;
    case "literal":
      return false;
    case "not":
      return readsResult(node.operand);
    default:
      return readsResult(node.left) || readsResult(node.right);
  }
}

function checkBoolean(node: ConditionNode, kind: ResultKind): void {
  switch (node.type) {
    case "not":
      return checkBoolean(node.operand, kind);
    case "logical":
      checkBoolean(node.left, kind);
      return checkBoolean(node.right, kind);
    case "compare":
      for (const side of [node.left, node.right]) {
        if (side.type !== "literal" && side.type !== "result") throw new ConditionError(`"${node.op}" compares values, not conditions`);
        if (side.type === "literal" && side.value !== null && typeof side.value !== "number") {
          if (!["==", "!="].includes(node.op)) throw new ConditionError(`"${node.op}" compares numbers, not ${JSON.stringify(side.value)}`);
          if (kind === "number") throw new ConditionError(`result is a number and cannot equal ${JSON.stringify(side.value)}`);
        }
        if (side.type === "literal" && side.value === null && !["==", "!="].includes(node.op)) {
          throw new ConditionError(`"${node.op}" compares numbers, not null`);
        }
      }
      return;
    case "result":
      if (kind === "number") throw new ConditionError("result is a number, not a condition (compare it, e.g. result < 0.05)");
      return;
    case "literal":
      if (typeof node.value !== "boolean") throw new ConditionError(`${JSON.stringify(node.value)} is not a condition`);
      return;
  }
}

/** Parses and checks; the one entry point for validating a configured condition. */
export function compileCondition(source: string, kind: ResultKind): ConditionNode {
  const node = parseCondition(source);
  checkCondition(node, kind);
  return node;
}

/** A condition that cannot be decided for this value (a string where a number was expected…). */
export class ConditionEvaluationError extends Error {
  override readonly name = "ConditionEvaluationError";
}

/** Evaluates a condition for a measured value; throws {@link ConditionEvaluationError} when undecidable. */
export function evaluateCondition(node: ConditionNode, result: ConditionValue): boolean {
  const value = evaluate(node, result);
  if (typeof value !== "boolean") throw new ConditionEvaluationError(`${show(value)} is not true or false`);
  return value;
}

function evaluate(node: ConditionNode, result: ConditionValue): ConditionValue {
  switch (node.type) {
    case "literal":
      return node.value;
    case "result":
      return result;
    case "not":
      return !truth(evaluate(node.operand, result));
    case "logical": {
      const left = truth(evaluate(node.left, result));
      if (node.op === "and" ? !left : left) return left;
      return truth(evaluate(node.right, result));
    }
    case "compare":
      return compare(node.op, evaluate(node.left, result), evaluate(node.right, result));
  }
}

function truth(value: ConditionValue): boolean {
  if (typeof value !== "boolean") throw new ConditionEvaluationError(`${show(value)} is not true or false`);
  return value;
}

function compare(op: CompareOp, a: ConditionValue, b: ConditionValue): boolean {
  if (op === "==") return a === b;
  if (op === "!=") return a !== b;
  if (typeof a !== "number" || typeof b !== "number") {
    throw new ConditionEvaluationError(`cannot order ${show(a)} ${op} ${show(b)}: "${op}" compares numbers`);
  }
  switch (op) {
    case "<":
      return a < b;
    case "<=":
      return a <= b;
    case ">":
      return a > b;
    case ">=":
      return a >= b;
  }
}

function show(value: ConditionValue): string {
  return typeof value === "string" ? JSON.stringify(value) : String(value);
}
