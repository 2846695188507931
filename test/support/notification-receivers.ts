import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { simpleParser, type ParsedMail } from "mailparser";
import { SMTPServer } from "smtp-server";

/** Resolves waiters once enough recorded items match. */
class Recorded<T> {
  readonly items: T[] = [];
  private readonly waiters: { match: (r: T) => boolean; count: number; resolve: () => void }[] = [];

  add(item: T): void {
    this.items.push(item);
    for (const w of [...this.waiters]) this.check(w);
  }

  /** Resolves once `count` items matching have arrived (at once if they already have). */
  waitFor(match: (r: T) => boolean, count = 1): Promise<T[]> {
    return new Promise<void>((resolve) => this.check({ match, count, resolve })).then(() => this.items.filter(match));
  }

  private check(w: { match: (r: T) => boolean; count: number; resolve: () => void }): void {
    const i = this.waiters.indexOf(w);
    if (this.items.filter(w.match).length >= w.count) {
      if (i >= 0) this.waiters.splice(i, 1);
      w.resolve();
    } else if (i < 0) this.waiters.push(w);
  }
}

export interface HttpPost {
  path: string;
  headers: IncomingHttpHeaders;
  /** The body as received (parsed with JSON.parse). */
  body: Record<string, unknown>;
  raw: string;
  answered: number;
}

/**
 * An HTTP server on loopback receiving webhook posts (Slack, Teams, generic). Each path answers
 * with the statuses listed for it in turn (the last one repeats); every request is recorded.
 */
export class WebhookReceiver extends Recorded<HttpPost> {
  private readonly answers = new Map<string, number[]>();
  private server!: Server;
  url = "";

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const path = req.url ?? "/";
        const statuses = this.answers.get(path) ?? [200];
        const answered = statuses.length > 1 ? statuses.shift()! : statuses[0]!;
        const raw = Buffer.concat(chunks).toString("utf8");
        res.writeHead(answered, { "content-type": "text/plain" }).end(answered < 300 ? "ok" : "no");
        this.add({ path, headers: req.headers, body: JSON.parse(raw) as Record<string, unknown>, raw, answered });
      });
    });
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Sets what `path` answers, in turn; returns its URL. */
  answer(path: string, ...statuses: number[]): string {
    this.answers.set(path, statuses);
    return `${this.url}${path}`;
  }

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}

export interface ReceivedMail {
  from: string;
  to: string[];
  user: string | undefined;
  secure: boolean;
  mail: ParsedMail;
  raw: string;
}

/**
 * A real SMTP server (the nodemailer project's smtp-server) on loopback: STARTTLS with the given
 * certificate, a login required (PLAIN or LOGIN, with `password`), each message parsed by mailparser.
 */
export class SmtpReceiver extends Recorded<ReceivedMail> {
  private server!: SMTPServer;
  port = 0;

  constructor(private readonly o: { certPem: string; keyPem: string; username: string; password: string }) {
    super();
  }

  async start(): Promise<void> {
    this.server = new SMTPServer({
      key: this.o.keyPem,
      cert: this.o.certPem,
      authMethods: ["PLAIN", "LOGIN"],
      // A login only over TLS (the default), so the client must have upgraded with STARTTLS first.
      allowInsecureAuth: false,
      logger: false,
      onAuth: (auth, _session, cb) => {
        if (auth.username === this.o.username && auth.password === this.o.password) cb(null, { user: auth.username });
        else cb(new Error("Invalid username or password"));
      },
      onData: (stream, session, cb) => {
        const chunks: Buffer[] = [];
        // Read now: the session's envelope is reset once the message is accepted.
        const envelope = {
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          to: session.envelope.rcptTo.map((r) => r.address),
          user: session.user as string | undefined,
          secure: session.secure,
        };
        stream.on("data", (c: Buffer) => chunks.push(c));
        stream.on("end", () => {
          const raw = Buffer.concat(chunks).toString("utf8");
          void simpleParser(raw).then((mail) => {
            cb();
            this.add({ ...envelope, mail, raw });
          }, cb);
        });
      },
    });
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.port = (this.server.server.address() as AddressInfo).port;
  }

  stop(): Promise<void> {
    return new Promise((r) => this.server.close(() => r()));
  }
}
