import { randomInt, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32, inflateRawSync } from 'node:zlib';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import pino from 'pino';
import { type AppDeps, buildApp } from '../src/app.ts';
import { type Config, loadConfig } from '../src/config.ts';
import { connect, type Db, type DialectName } from '../src/db/connect.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { channels, type Channel } from '../src/providers/provider.ts';
import { SandboxProvider } from '../src/providers/sandbox/index.ts';
import { recordStatuses } from './status-recorder.ts';

/** SQLite always; PostgreSQL too when TEST_DATABASE_URL is set. */
/**
 * The databases each test runs on: SQLite, and PostgreSQL where TEST_DATABASE_URL is set. TEST_DIALECTS
 * (`postgres`) narrows it: .ci/run's second run, on Node 24, takes the PostgreSQL case of each such test (every
 * test then runs on each database, and at least once on Node 24, in less time).
 */
const only = process.env.TEST_DIALECTS?.split(',').map((d) => d.trim());
export const dialects: DialectName[] = (
  ['sqlite', ...(process.env.TEST_DATABASE_URL ? (['postgres'] as const) : [])] as DialectName[]
).filter((d) => !only || only.includes(d));
export const redisUrl = process.env.TEST_REDIS_URL;

export interface TestApp {
  app: FastifyInstance;
  config: Readonly<Config>;
  db: Db;
  providers: Record<Channel, SandboxProvider>;
  close(): Promise<void>;
}

const silent = pino({ level: 'silent' });

/**
 * The real application on a real database: a private in-memory SQLite database, or the shared PostgreSQL
 * test database (each test makes its own workspace, so nothing needs truncating). Rate limits are high
 * unless a test sets them.
 */
export async function buildTestApp(
  dialect: DialectName,
  env: Record<string, string> = {},
  deps: Pick<AppDeps, 'webhookResolver'> = {},
): Promise<TestApp> {
  const config = loadConfig({
    DATABASE_URL: dialect === 'sqlite' ? 'sqlite::memory:' : process.env.TEST_DATABASE_URL,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    RATE_LIMIT_PUBLIC_PER_MIN: '100000',
    RATE_LIMIT_AUTHENTICATED_PER_MIN: '100000',
    RATE_LIMIT_AUTH_PER_MIN: '100000',
    RATE_LIMIT_AUTH_IP_PER_MIN: '100000',
    // Quiet hours (on by default) would hold bulk deliveries at night in India; their tests turn them on.
    QUIET_HOURS: '',
    RATE_LIMIT_OTP_PER_MIN: '100000',
    RATE_LIMIT_AUTH_FAILED_PER_MIN: '100000',
    ...env,
  });
  const db = connect(config.databaseUrl, config.database);
  await migrateToLatest(db);
  const providers = Object.fromEntries(
    channels.map((c) => [c, new SandboxProvider(c, silent, config.sandboxDeliveryDelayMs, true)]),
  ) as Record<Channel, SandboxProvider>;
  const app = await buildApp({ config, db, providers, rateLimitPrefix: `test:${randomUUID()}`, ...deps });
  recordStatuses(app);
  return {
    app,
    config,
    db,
    providers,
    close: async () => {
      await app.close();
      await db.close().catch(() => {});
    },
  };
}

/**
 * Two applications on one database, as two API processes would be: a SQLite file in a temporary folder, or
 * the PostgreSQL test database. `close` closes both and removes the folder.
 */
export async function buildTwoApps(
  dialect: DialectName,
  env: Record<string, string> = {},
): Promise<[TestApp, TestApp, () => Promise<void>]> {
  const dir = mkdtempSync(join(tmpdir(), 'ces-two-'));
  const shared = dialect === 'sqlite' ? { DATABASE_URL: `sqlite:${join(dir, 'shared.db')}`, ...env } : env;
  const a = await buildTestApp(dialect, shared);
  const b = await buildTestApp(dialect, shared);
  return [
    a,
    b,
    async () => {
      await a.close();
      await b.close();
      rmSync(dir, { recursive: true, force: true });
    },
  ];
}

export interface CallOptions {
  token?: string;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface Answer {
  status: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
  headers: LightMyRequestResponse['headers'];
  raw: string;
}

export async function call(
  app: FastifyInstance,
  method: string,
  url: string,
  options: CallOptions = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  let payload: string | undefined;
  if (options.body !== undefined) {
    payload = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await app.inject({ method: method as 'GET', url, headers, payload });
  let body: unknown;
  try {
    body = res.json();
  } catch {
    body = undefined;
  }
  return { status: res.statusCode, body, headers: res.headers, raw: res.body };
}

/** The ids of a workspace's voters, in id order, straight from the database. */
export async function voterIds(t: TestApp, workspaceId: number): Promise<number[]> {
  const rows = await t.db.kysely
    .selectFrom('voters')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .orderBy('id')
    .execute();
  return rows.map((r) => Number(r.id));
}

export function uniqueEmail(prefix = 'user'): string {
  return `${prefix}.${randomUUID().slice(0, 12)}@example.com`;
}

/**
 * Endings the provider doubles and the sandbox treat as failures: the sandbox fails 0000; the doubles refuse
 * 4030 (Exotel), 4700 (Meta's 131047), 4290 (Meta's 130429), 9999, 6100 and 5030 (Twilio, MSG91).
 */
export const FAILING_PHONE_ENDINGS: ReadonlySet<string> = new Set([
  '0000',
  '4030',
  '4700',
  '4290',
  '9999',
  '6100',
  '5030',
]);

/**
 * A random Indian mobile number in E.164, unique enough for a shared test database. It never ends in one of
 * FAILING_PHONE_ENDINGS: 7 in 10,000 random numbers would otherwise make a test that expects a send to go
 * through fail by chance.
 */
export function uniquePhone(): string {
  for (;;) {
    const digits = String(randomInt(0, 1_000_000_000)).padStart(9, '0');
    if (!FAILING_PHONE_ENDINGS.has(digits.slice(-4))) return `+919${digits}`;
  }
}

export interface Account {
  token: string;
  user: { id: number; name: string; email: string; phone: string | null; role: string; workspace_id: number };
  password: string;
}

/** Registers a new workspace and returns its politician's token. */
export async function register(app: FastifyInstance, body: Record<string, unknown> = {}): Promise<Account> {
  const password = 'correct horse battery';
  const res = await call(app, 'POST', '/api/auth/register', {
    body: { name: 'Asha Rao', email: uniqueEmail(), password, phone: uniquePhone(), ...body },
  });
  if (res.status !== 201) throw new Error(`register failed: ${res.status} ${res.raw}`);
  return { token: res.body.data.access_token, user: res.body.data.user, password };
}

/** Adds a team member with the given role to the politician's workspace and signs them in. */
export async function addMember(
  app: FastifyInstance,
  owner: Account,
  role: 'manager' | 'volunteer',
): Promise<Account> {
  const password = 'member password 1';
  const email = uniqueEmail(role);
  const created = await call(app, 'POST', '/api/users', {
    token: owner.token,
    body: { name: `A ${role}`, email, password, role },
  });
  if (created.status !== 201) throw new Error(`add member failed: ${created.status} ${created.raw}`);
  const login = await call(app, 'POST', '/api/auth/login', { body: { email, password } });
  return { token: login.body.data.access_token, user: login.body.data.user, password };
}

export function expectError(res: Answer, status: number, code: string): void {
  if (res.status !== status || res.body?.success !== false || res.body?.error_code !== code) {
    throw new Error(`expected ${status} ${code}, got ${res.status} ${res.raw}`);
  }
  if (typeof res.body.message !== 'string' || res.body.message.length === 0)
    throw new Error('error without message');
  if (/\bat .+\.(ts|js):\d+/.test(res.raw)) throw new Error(`stack trace leaked: ${res.raw}`);
}

export interface FilePart {
  name: string;
  content: string | Buffer;
  filename?: string;
  contentType?: string;
}

/** A multipart/form-data body with the given file (and plain field) parts. */
export function multipartBody(parts: (FilePart | { name: string; value: string })[]): {
  payload: Buffer;
  contentType: string;
} {
  const boundary = `----ces${randomUUID().replace(/-/g, '')}`;
  const chunks: Buffer[] = [];
  for (const part of parts) {
    if ('value' in part) {
      chunks.push(
        Buffer.from(
          `--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"\r\n\r\n${part.value}\r\n`,
        ),
      );
      continue;
    }
    chunks.push(
      Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"; filename="${part.filename ?? 'voters.csv'}"\r\n` +
          `Content-Type: ${part.contentType ?? 'text/csv'}\r\n\r\n`,
      ),
      Buffer.isBuffer(part.content) ? part.content : Buffer.from(part.content, 'utf8'),
      Buffer.from('\r\n'),
    );
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { payload: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

/** POST /api/voters/import with `content` as the multipart part `file`. */
export async function importCsv(
  app: FastifyInstance,
  token: string | undefined,
  content: string | Buffer,
): Promise<Answer> {
  const { payload, contentType } = multipartBody([{ name: 'file', content }]);
  const headers: Record<string, string> = { 'content-type': contentType };
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await app.inject({ method: 'POST', url: '/api/voters/import', headers, payload });
  let body: unknown;
  try {
    body = res.json();
  } catch {
    body = undefined;
  }
  return { status: res.statusCode, body, headers: res.headers, raw: res.body };
}

/** GET /api/voters/export; `raw` is the body as UTF-8 text, `bytes` as bytes. */
export async function exportVoters(
  app: FastifyInstance,
  token: string,
  query: { format?: string; filters?: unknown } = {},
): Promise<Answer & { bytes: Buffer }> {
  const params = new URLSearchParams();
  if (query.format) params.set('format', query.format);
  if (query.filters !== undefined) {
    params.set('filters', typeof query.filters === 'string' ? query.filters : JSON.stringify(query.filters));
  }
  const qs = params.toString();
  const res = await app.inject({
    method: 'GET',
    url: `/api/voters/export${qs ? `?${qs}` : ''}`,
    headers: { authorization: `Bearer ${token}` },
  });
  let body: unknown;
  try {
    body = res.json();
  } catch {
    body = undefined;
  }
  return { status: res.statusCode, body, headers: res.headers, raw: res.body, bytes: res.rawPayload };
}

/** The entries of a zip, read through its central directory (and checked against their CRCs). */
export function unzip(zip: Buffer): Map<string, Buffer> {
  const end = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  if (end < 0) throw new Error('no end of central directory');
  const count = zip.readUInt16LE(end + 10);
  let p = zip.readUInt32LE(end + 16);
  const out = new Map<string, Buffer>();
  for (let i = 0; i < count; i += 1) {
    if (zip.readUInt32LE(p) !== 0x02014b50) throw new Error('bad central directory entry');
    const method = zip.readUInt16LE(p + 10);
    const crc = zip.readUInt32LE(p + 16);
    const compressed = zip.readUInt32LE(p + 20);
    const size = zip.readUInt32LE(p + 24);
    const nameLength = zip.readUInt16LE(p + 28);
    const extra = zip.readUInt16LE(p + 30);
    const comment = zip.readUInt16LE(p + 32);
    const offset = zip.readUInt32LE(p + 42);
    const name = zip.toString('utf8', p + 46, p + 46 + nameLength);
    if (zip.readUInt32LE(offset) !== 0x04034b50) throw new Error(`bad local header for ${name}`);
    const start = offset + 30 + zip.readUInt16LE(offset + 26) + zip.readUInt16LE(offset + 28);
    const raw = zip.subarray(start, start + compressed);
    const data = method === 8 ? inflateRawSync(raw) : raw;
    if (data.length !== size || crc32(data) !== crc) throw new Error(`bad size or CRC for ${name}`);
    out.set(name, data);
    p += 46 + nameLength + extra + comment;
  }
  return out;
}

/** Rows of an RFC 4180 CSV text (enough for the tests: quotes, commas, line breaks). */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i += 1;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      row.push(field);
      field = '';
    } else if (c === '\n' || (c === '\r' && text[i + 1] === '\n')) {
      if (c === '\r') i += 1;
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
    } else field += c;
  }
  if (field !== '' || row.length > 0) rows.push([...row, field]);
  return rows;
}

/**
 * The OpenAPI document with every local `$ref` replaced by what it names (a sibling `description` kept), for
 * tests that read an operation's schemas as a whole.
 */
export function dereference<T>(document: T): T {
  const root = document as Record<string, unknown>;
  const resolve = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(resolve);
    if (typeof node !== 'object' || node === null) return node;
    const { $ref, ...rest } = node as Record<string, unknown>;
    if (typeof $ref === 'string' && $ref.startsWith('#/')) {
      const target = $ref
        .slice(2)
        .split('/')
        .reduce<unknown>((at, key) => (at as Record<string, unknown> | undefined)?.[key], root);
      if (target === undefined) throw new Error(`${$ref} names nothing in the document`);
      return { ...(resolve(target) as object), ...(resolve(rest) as object) };
    }
    return Object.fromEntries(Object.entries(rest).map(([key, value]) => [key, resolve(value)]));
  };
  return resolve(document) as T;
}
