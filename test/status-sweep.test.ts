/**
 * Each status the API document gives every operation of a kind, produced on every such operation: the fuzzer
 * (fuzz.test.ts) and the other tests reach the statuses of each operation's own rules; this reaches the ones
 * that need a state no single test sets up. With STATUS_COVERAGE_DIR set, what it reaches is recorded for
 * `npm run status-coverage` (test/status-recorder.ts), which .ci/run runs after the suite.
 *
 * - 429: an app whose every rate limit is 1 a minute;
 * - 503: an app whose database is closed (as at shutdown, or a file gone);
 * - 500: an app whose database lost its tables (a fault the service cannot explain to the caller);
 * - 400: malformed JSON, and a path segment over 2,048 characters;
 * - 413: a body over BODY_LIMIT_BYTES;
 * - 404 / 405: an operation's path with its last parameter empty, `.` or `..` (the collection's path or its
 *   parent's);
 * - 401 without a token, 403 for a volunteer where the permission is not theirs, 404 for an id that does not
 *   exist, 422 for a query parameter the operation does not take: each on every operation that lists it, so
 *   that none of them rests on what the fuzzer happened to generate.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Account, addMember, buildTestApp, dereference, register, type TestApp } from './helpers.ts';
import { unsubscribeToken } from '../src/modules/opt-outs/unsubscribe.ts';
import { recordStatus } from './status-recorder.ts';

interface Operation {
  method: string;
  path: string;
  /** The path with each parameter given a value of its own kind. */
  url: string;
  statuses: string[];
  body: 'json' | 'multipart' | undefined;
  isPublic: boolean;
  description: string;
}

type Schema = { type?: string; enum?: unknown[]; pattern?: string; 'x-id'?: string };

function sample(schema: Schema): string {
  if (schema.enum?.length) return String(schema.enum[0]);
  if (schema.type === 'integer') return '1';
  if (schema['x-id']) return `${schema['x-id']}_1`;
  if (schema.pattern?.startsWith('^[a-z0-9_]')) return 'ward';
  return 'x';
}

async function readOperations(t: TestApp): Promise<Operation[]> {
  await t.app.ready();
  const doc = dereference(t.app.swagger()) as unknown as {
    paths: Record<string, Record<string, Record<string, unknown>>>;
  };
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => {
      const parameters = (op.parameters ?? []) as { in: string; name: string; schema: Schema }[];
      const url = path.replace(/\{([^}]+)\}/g, (_, name: string) =>
        sample(parameters.find((p) => p.in === 'path' && p.name === name)?.schema ?? {}),
      );
      const content = (op.requestBody as { content?: Record<string, unknown> } | undefined)?.content;
      return {
        method: method.toUpperCase(),
        path,
        url,
        statuses: Object.keys(op.responses as object),
        body: content?.['multipart/form-data'] ? 'multipart' : content ? 'json' : undefined,
        isPublic: Array.isArray(op.security) && op.security.length === 0,
        description: typeof op.description === 'string' ? op.description : '',
      } satisfies Operation;
    }),
  );
}

/** Bodies the public sign-in routes take, so that they reach the database. */
const signInBodies: Record<string, Record<string, string>> = {
  '/api/auth/register': { name: 'Asha Rao', email: 'sweep@example.com', password: 'correct horse battery' },
  '/api/auth/login': { email: 'sweep@example.com', password: 'correct horse battery' },
  '/api/auth/send-otp': { phone: '+919812345678' },
  '/api/auth/verify-otp': { phone: '+919812345678', otp: '123456' },
  '/api/auth/reset-password': { phone: '+919812345678', code: '123456', password: 'correct horse battery' },
};

const limits = Object.fromEntries(
  ['PUBLIC', 'AUTHENTICATED', 'AUTH', 'AUTH_IP', 'OTP', 'AUTH_FAILED', 'CALLBACK'].map((kind) => [
    `RATE_LIMIT_${kind}_PER_MIN`,
    '1',
  ]),
);

describe('each documented status, on every operation that documents it', () => {
  let operations: Operation[];

  beforeAll(async () => {
    const t = await buildTestApp('sqlite');
    operations = await readOperations(t);
    await t.close();
  });

  /**
   * Sends `op` as a caller would who gets past its checks: a token, a body the sign-in routes take (an empty JSON
   * body elsewhere), an unsubscribe link the app signed, a callback URL naming an account id.
   */
  async function send(t: TestApp, op: Operation, token: string, extra: { url?: string; body?: string } = {}) {
    const body = extra.body ?? JSON.stringify(signInBodies[op.path] ?? {});
    const url = (extra.url ?? op.url)
      .replace('/unsubscribe/x', `/unsubscribe/${unsubscribeToken(t.config.appKey, 1, 'voter@example.com')}`)
      .replace(/\/providers\/x\/x\/x\/x$/, '/providers/msg91/cha_1/x/status');
    return t.app.inject({
      method: op.method as 'GET',
      url,
      headers: {
        authorization: `Bearer ${token}`,
        ...(op.body || extra.body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(op.body || extra.body !== undefined ? { payload: body } : {}),
    });
  }

  /** Each operation documenting `status` answers it when `answer` sends it; the list of those that did not. */
  async function sweep(
    status: number,
    answer: (op: Operation) => Promise<number>,
    only: (op: Operation) => boolean = () => true,
  ): Promise<string[]> {
    const missed: string[] = [];
    for (const op of operations.filter((o) => o.statuses.includes(String(status)) && only(o))) {
      const got = await answer(op);
      if (got === status) recordStatus(op.method, op.path, status);
      else missed.push(`${op.method} ${op.path}: ${got}`);
    }
    return missed;
  }

  it('429 once the caller is over its limit', async () => {
    const t = await buildTestApp('sqlite', limits);
    try {
      const { token } = await register(t.app);
      const missed = await sweep(429, async (op) => {
        let status = 0;
        for (let i = 0; i < 3 && status !== 429; i++) status = (await send(t, op, token)).statusCode;
        return status;
      });
      expect(missed).toEqual([]);
    } finally {
      await t.close();
    }
  });

  it('503 when the database is closed', async () => {
    const t = await buildTestApp('sqlite');
    try {
      const { token } = await register(t.app);
      await t.db.close();
      // A sign-in code is sent in the background: its 503 comes from PostgreSQL's outage breaker (db-faults.test.ts).
      const missed = await sweep(
        503,
        async (op) => (await send(t, op, token)).statusCode,
        (op) => op.path !== '/api/auth/send-otp',
      );
      expect(missed).toEqual([]);
    } finally {
      await t.close();
    }
  });

  it('500 when the database has lost its tables', async () => {
    const t = await buildTestApp('sqlite');
    try {
      const { token } = await register(t.app);
      const tables = await sql<{ name: string }>`
        select name from sqlite_master where type = 'table' and name not like 'sqlite_%'`.execute(
        t.db.kysely,
      );
      await sql`pragma foreign_keys = off`.execute(t.db.kysely);
      // A virtual (full-text) table takes its shadow tables with it: those are gone when their turn comes.
      for (const { name } of tables.rows)
        await sql`drop table if exists ${sql.id(name)}`.execute(t.db.kysely).catch(() => {});
      const missed = await sweep(500, async (op) => (await send(t, op, token)).statusCode);
      expect(missed).toEqual([]);
    } finally {
      await t.close();
    }
  });

  describe('on a working app', () => {
    let t: TestApp;
    let token: string;
    let account: Account;
    beforeAll(async () => {
      t = await buildTestApp('sqlite', { BODY_LIMIT_BYTES: '1024' });
      account = await register(t.app);
      token = account.token;
    });
    afterAll(() => t.close());

    it('401 without a token', async () => {
      const missed = await sweep(
        401,
        async (op) => (await t.app.inject({ method: op.method as 'GET', url: op.url })).statusCode,
        (op) => !op.isPublic && !op.path.startsWith('/api/providers/'),
      );
      expect(missed).toEqual([]);
    });

    it('403 for a volunteer where the permission is not theirs', async () => {
      const volunteer = await addMember(t.app, account, 'volunteer');
      const missed = await sweep(
        403,
        async (op) => (await send(t, op, volunteer.token)).statusCode,
        (op) => /\(politician(, manager)?\)\.$/.test(op.description),
      );
      expect(missed).toEqual([]);
    });

    it('404 for an id that does not exist', async () => {
      const missed = await sweep(
        404,
        async (op) =>
          (
            await send(t, op, token, {
              url: op.url.replace(/_1\b|\/1(?=\/|$)/g, (m) => m.replace('1', '999999')),
            })
          ).statusCode,
        // An operation with a body checks the body first: its 404 needs a valid body (its own tests send one).
        (op) =>
          /\{(id|import_id|delivery_id)\}/.test(op.path) &&
          !op.body &&
          !op.path.startsWith('/api/providers/'),
      );
      expect(missed).toEqual([]);
    });

    it('422 for a query parameter the operation does not take', async () => {
      const missed = await sweep(
        422,
        async (op) => (await send(t, op, token, { url: `${op.url}?not_a_parameter=1` })).statusCode,
        (op) => !op.path.startsWith('/api/providers/') && !op.path.startsWith('/api/unsubscribe/'),
      );
      expect(missed).toEqual([]);
    });

    it('400 for malformed JSON, where an operation takes a body', async () => {
      const missed = await sweep(
        400,
        async (op) => (await send(t, op, token, { body: '{"name": ' })).statusCode,
        (op) => op.body === 'json',
      );
      expect(missed).toEqual([]);
    });

    it('400 for a path segment over 2,048 characters', async () => {
      const missed = await sweep(
        400,
        async (op) => {
          const long = 'a'.repeat(2049);
          const url = op.path.replace(/\{[^}]+\}/, long).replace(/\{[^}]+\}/g, 'x');
          return (await send(t, op, token, { url })).statusCode;
        },
        (op) => op.path.includes('{'),
      );
      expect(missed).toEqual([]);
    });

    it('413 for a body over the limit', async () => {
      const missed = await sweep(
        413,
        async (op) =>
          (await send(t, op, token, { body: JSON.stringify({ text: 'a'.repeat(2048) }) })).statusCode,
        (op) => op.body !== undefined,
      );
      expect(missed).toEqual([]);
    });

    it('a documented answer where the last parameter is empty, `.` or `..` (the collection, or its parent)', async () => {
      const missed: string[] = [];
      for (const op of operations.filter((o) => /\{[^}]+\}$/.test(o.path))) {
        for (const last of ['', '.', '..']) {
          // `/privacy/..` is the site's root (a redirect to the console), not an operation of the API.
          if (last === '..' && !op.path.startsWith('/api/')) continue;
          const url = op.url.replace(/\/[^/]*$/, `/${last}`);
          const status = (await send(t, op, token, { url })).statusCode;
          if (op.statuses.includes(String(status))) recordStatus(op.method, op.path, status);
          else missed.push(`${op.method} ${op.path} with "${last}": ${status}`);
        }
      }
      expect(missed).toEqual([]);
    });
  });
});
