/**
 * Schema-driven fuzzing of every operation of the OpenAPI document: for each one, fast-check builds requests
 * from its own schemas (path, query, JSON or multipart body) and bends them: wrong types, huge and unicode
 * strings, prototype keys, huge arrays, boundary numbers, unknown fields. Every answer must be a documented
 * status, an error in the envelope and of bounded size, never a 5xx, and the process must still answer.
 * Upload bodies carry their `file` part among other parts in any order. The methods a path does not take are
 * fuzzed too (405). FUZZ_RUNS (default 25) random requests per operation, besides the fixed hostile examples;
 * FUZZ_SEED replays a run.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Account,
  buildTestApp,
  dereference,
  dialects,
  multipartBody,
  register,
  type TestApp,
} from './helpers.ts';

const RUNS = Number(process.env.FUZZ_RUNS ?? 25);
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : undefined;
/** An error answer longer than this is unbounded work done for a hostile caller. */
const MAX_ERROR_BYTES = 64 * 1024;

type Schema = Record<string, unknown> & {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
  enum?: unknown[];
  const?: unknown;
  format?: string;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  maxItems?: number;
  additionalProperties?: unknown;
};

interface Parameter {
  in: 'path' | 'query' | 'header';
  name: string;
  required?: boolean;
  schema: Schema;
}

interface Operation {
  method: string;
  path: string;
  parameters: Parameter[];
  body: { type: 'json' | 'multipart'; schema: Schema } | undefined;
  statuses: string[];
}

interface FuzzRequest {
  path: Record<string, string>;
  query: Array<[string, string]>;
  /** JSON text, or a raw payload with its own content type. */
  body: { text: string; contentType: string } | undefined;
  /** Keys of the body object that its schema does not name. */
  unknownBodyKeys: string[];
  signedIn: boolean;
}

// ---------------------------------------------------------------- the operations, read once from the document

async function readOperations(): Promise<Operation[]> {
  const t = await buildTestApp('sqlite');
  await t.app.ready();
  const doc = dereference(t.app.swagger()) as unknown as {
    paths: Record<string, Record<string, Record<string, unknown>>>;
  };
  await t.close();
  const operations: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const content = (op.requestBody as { content?: Record<string, { schema: Schema }> } | undefined)
        ?.content;
      const body = content?.['application/json']
        ? { type: 'json' as const, schema: content['application/json'].schema }
        : content?.['multipart/form-data']
          ? { type: 'multipart' as const, schema: content['multipart/form-data'].schema }
          : undefined;
      operations.push({
        method: method.toUpperCase(),
        path,
        parameters: (op.parameters as Parameter[] | undefined) ?? [],
        body,
        statuses: Object.keys(op.responses as object),
      });
    }
  }
  return operations;
}

const operations = await readOperations();

// ---------------------------------------------------------------- values

const PROTOTYPE_KEYS = [
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'hasOwnProperty',
  'valueOf',
  '__defineGetter__',
];

const hostileStrings = [
  '',
  ' ',
  '\u0000',
  '\ud800',
  '\u202e\u0041',
  'x'.repeat(10_000),
  '𝕏'.repeat(500),
  'मतदाता'.repeat(200),
  "'; DROP TABLE voters; --",
  '" OR 1=1 --',
  '{{constructor.constructor}}',
  '=HYPERLINK("http://evil")',
  '../../../../etc/passwd',
  '%00%ff',
  '<script>alert(1)</script>',
  ...PROTOTYPE_KEYS,
];

const boundaryNumbers = [
  0,
  -0,
  -1,
  1,
  0.5,
  2 ** 31 - 1,
  2 ** 31,
  2 ** 53 - 1,
  2 ** 53 + 2,
  -(2 ** 53),
  1e308,
  -1e308,
  5e-324,
];

/** Anything at all: the wrong type for whatever the schema wants. */
const hostile: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<unknown>(null, true, false, ...boundaryNumbers, ...hostileStrings),
  fc.string(),
  fc.string({ unit: 'grapheme', maxLength: 200 }),
  fc.string({ unit: 'binary', maxLength: 50 }),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.array(fc.oneof(fc.string(), fc.integer()), { maxLength: 5 }),
  fc.dictionary(fc.oneof(fc.string(), fc.constantFrom(...PROTOTYPE_KEYS)), fc.string(), { maxKeys: 3 }),
  fc.constant(Array.from({ length: 20_000 }, () => 'x')),
);

function typed(schema: Schema, depth: number): fc.Arbitrary<unknown> {
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (schema.enum) return fc.constantFrom(...schema.enum);
  const branches = schema.anyOf ?? schema.oneOf;
  if (branches) return fc.oneof(...branches.map((b) => valueFor(b, depth)));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'string': {
      if (schema.format === 'email') return fc.emailAddress();
      if (schema.format === 'date-time') return fc.date({ noInvalidDate: true }).map((d) => d.toISOString());
      if (schema.format === 'date')
        return fc.date({ noInvalidDate: true }).map((d) => d.toISOString().slice(0, 10));
      const max = schema.maxLength ?? 40;
      return fc.oneof(
        fc.string({ minLength: schema.minLength ?? 0, maxLength: Math.min(max, 60) }),
        fc.constant('x'.repeat(max)),
        fc.constant('x'.repeat(max + 1)),
        fc.stringMatching(/^\+91[6-9]\d{9}$/),
      );
    }
    case 'integer':
    case 'number': {
      const min = schema.minimum ?? -(2 ** 31);
      const max = schema.maximum ?? 2 ** 31;
      return fc.oneof(
        fc.integer({ min: Math.max(min, -(2 ** 31)), max: Math.min(max, 2 ** 31) }),
        fc.constantFrom(min, max, min - 1, max + 1, (min + max) / 2 + 0.5),
      );
    }
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array':
      return fc.array(valueFor(schema.items ?? {}, depth + 1), {
        maxLength: Math.min((schema.maxItems ?? 4) + 1, 6),
      });
    case 'object':
      return objectEntries(schema, depth + 1).map(({ entries }) => Object.fromEntries(entries));
    default:
      return hostile;
  }
}

/** Mostly what the schema asks for (bent at its edges), sometimes anything. */
function valueFor(schema: Schema, depth = 0): fc.Arbitrary<unknown> {
  if (depth > 3) return hostile;
  return fc.oneof({ weight: 3, arbitrary: typed(schema, depth) }, { weight: 1, arbitrary: hostile });
}

/** An object's entries: each property present or not, plus now and then unknown or prototype keys. */
function objectEntries(
  schema: Schema,
  depth: number,
): fc.Arbitrary<{ entries: Array<[string, unknown]>; unknown: string[] }> {
  const properties = Object.entries(schema.properties ?? {});
  const present = properties.map(([name, s]) =>
    fc.option(
      valueFor(s, depth).map((v) => [name, v] as [string, unknown]),
      { freq: schema.required?.includes(name) ? 8 : 2 },
    ),
  );
  const extra = fc.array(
    fc.tuple(
      fc.oneof(fc.constantFrom(...PROTOTYPE_KEYS, 'role', 'workspace_id', 'id'), fc.string()),
      hostile,
    ),
    { maxLength: 2 },
  );
  return fc
    .tuple(
      fc.tuple(...present),
      fc.oneof({ weight: 4, arbitrary: fc.constant([]) }, { weight: 1, arbitrary: extra }),
    )
    .map(([given, more]) => {
      const known = new Set(properties.map(([name]) => name));
      const entries = [...given.filter((e): e is [string, unknown] => e !== null), ...more];
      return { entries, unknown: more.map(([k]) => k).filter((k) => !known.has(k)) };
    });
}

/** JSON text of entries, written by hand so that `__proto__` stays a key and duplicates stay duplicates. */
function jsonObject(entries: Array<[string, unknown]>): string {
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v) ?? 'null'}`).join(',')}}`;
}

/** Percent-encoding that survives lone surrogates: those go out as the bytes of one, which is not UTF-8. */
function encode(text: string): string {
  try {
    return encodeURIComponent(text);
  } catch {
    return '%ED%A0%80';
  }
}

/** A query or path value as the text a client would send. */
function asText(value: unknown): string {
  return typeof value === 'string' ? value : (JSON.stringify(value) ?? '');
}

// ---------------------------------------------------------------- requests

const rawJsonBodies = [
  '',
  'null',
  '[]',
  '"text"',
  '0',
  '{',
  '{"a":',
  '[1,2',
  '{"a":1,}',
  '\u0000',
  '{"a":"\\ud800"}',
];

function requestFor(op: Operation): fc.Arbitrary<FuzzRequest> {
  const pathParams = op.parameters.filter((p) => p.in === 'path');
  const queryParams = op.parameters.filter((p) => p.in === 'query');
  const path = fc.record(
    Object.fromEntries(
      pathParams.map((p) => [
        p.name,
        fc.oneof(
          { weight: 3, arbitrary: valueFor(p.schema).map((v) => encode(asText(v))) },
          {
            weight: 1,
            arbitrary: fc.constantFrom(
              '-1',
              '0',
              '1e3',
              '0x10',
              '9007199254740993',
              'camp_1',
              'x'.repeat(101),
              '%ff',
              '%c0%af',
              '..',
              '%2e%2e%2f',
            ),
          },
        ),
      ]),
    ),
  ) as fc.Arbitrary<Record<string, string>>;
  const query = fc
    .tuple(
      fc.tuple(
        ...queryParams.map((p) =>
          fc.option(valueFor(p.schema).map((v) => [p.name, asText(v)] as [string, string])),
        ),
      ),
      fc.oneof(
        { weight: 5, arbitrary: fc.constant([]) },
        {
          weight: 1,
          arbitrary: fc.array(fc.tuple(fc.constantFrom(...PROTOTYPE_KEYS, 'unknown'), fc.string()), {
            maxLength: 2,
          }),
        },
      ),
    )
    .map(([given, more]) => [...given.filter((e): e is [string, string] => e !== null), ...more]);

  let body: fc.Arbitrary<{ body: FuzzRequest['body']; unknown: string[] }> = fc.constant({
    body: undefined,
    unknown: [],
  });
  if (op.body?.type === 'json') {
    const strict = op.body.schema.additionalProperties === false;
    body = fc.oneof(
      {
        weight: 6,
        arbitrary: objectEntries(op.body.schema, 0).map(({ entries, unknown }) => ({
          body: { text: jsonObject(entries), contentType: 'application/json' },
          unknown: strict ? unknown : [],
        })),
      },
      {
        weight: 1,
        arbitrary: hostile.map((v) => ({
          body: { text: JSON.stringify(v) ?? 'null', contentType: 'application/json' },
          unknown: [],
        })),
      },
      {
        weight: 1,
        arbitrary: fc
          .constantFrom(...rawJsonBodies)
          .map((text) => ({ body: { text, contentType: 'application/json' }, unknown: [] })),
      },
      {
        weight: 1,
        arbitrary: fc
          .constantFrom(
            'text/plain',
            'application/x-www-form-urlencoded',
            'application/xml',
            'multipart/form-data; boundary=x',
          )
          .map((contentType) => ({
            body: { text: 'a=1&b=2', contentType },
            unknown: [],
          })),
      },
    );
  } else if (op.body?.type === 'multipart') {
    // The upload's `file` part (or one misnamed), with other parts in any order around it: more file parts, the
    // schema's own fields (`mapping`, `dry_run`) and unknown ones, with hostile values.
    const fields = Object.keys(op.body.schema.properties ?? {}).filter((k) => k !== 'file');
    const content = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 300 }),
      fc.constantFrom(
        'name,phone\n',
        'name,phone\nA,+919812345678\n',
        '\ufeffname,phone\n"unterminated',
        `name,phone\n${'x'.repeat(50_000)},1\n`,
      ),
    );
    const extra = fc.oneof(
      fc.record({ name: fc.constantFrom('other', 'file2', 'csv', ...fields), content }),
      fc.record({
        name: fc.constantFrom(...fields, 'unknown_field', '__proto__'),
        value: fc.oneof(
          fc.constantFrom(...hostileStrings),
          fc.constantFrom('{}', '{"Name":"name"}', 'true', '[]'),
        ),
      }),
    );
    body = fc
      .tuple(fc.constantFrom('file', 'csv', ''), content, fc.array(extra, { maxLength: 3 }), fc.nat(3))
      .map(([name, main, extras, at]) => {
        const parts = [...extras];
        parts.splice(Math.min(at, parts.length), 0, { name: name || 'file', content: main });
        const { payload, contentType } = multipartBody(parts);
        return { body: { text: payload.toString('latin1'), contentType }, unknown: [] };
      });
  }
  return fc
    .record({
      path,
      query,
      body,
      signedIn: fc.oneof(
        // Mostly signed in, so that requests get past the guard to validation and the handlers.
        { weight: 4, arbitrary: fc.constant(true) },
        { weight: 1, arbitrary: fc.constant(false) },
      ),
    })
    .map(({ path: p, query: q, body: b, signedIn }) => ({
      path: p,
      query: q,
      body: b.body,
      unknownBodyKeys: b.unknown,
      signedIn,
    }));
}

/** Fixed hostile requests every operation gets, whatever the random ones are. */
function examplesFor(op: Operation): FuzzRequest[] {
  const base: FuzzRequest = { path: {}, query: [], body: undefined, unknownBodyKeys: [], signedIn: true };
  for (const p of op.parameters.filter((x) => x.in === 'path')) base.path[p.name] = '1';
  const examples: FuzzRequest[] = [];
  for (const name of Object.keys(base.path)) {
    for (const value of ['x'.repeat(101), '%ff%fe', '-1', '9007199254740993']) {
      examples.push({ ...base, path: { ...base.path, [name]: value } });
    }
  }
  if (op.body?.type === 'json') {
    const strict = op.body.schema.additionalProperties === false;
    for (const key of PROTOTYPE_KEYS) {
      examples.push({
        ...base,
        body: { text: jsonObject([[key, 'x']]), contentType: 'application/json' },
        unknownBodyKeys: strict ? [key] : [],
      });
    }
    const many = Array.from({ length: 30_000 }, (_, i) => [`field${i}`, 1] as [string, unknown]);
    examples.push({
      ...base,
      body: { text: jsonObject(many), contentType: 'application/json' },
      unknownBodyKeys: strict ? ['field0'] : [],
    });
    const wide = Object.keys(op.body.schema.properties ?? {}).map(
      (k) => [k, Array.from({ length: 40_000 }, () => 'x')] as [string, unknown],
    );
    examples.push({ ...base, body: { text: jsonObject(wide), contentType: 'application/json' } });
  }
  if (op.method === 'GET') examples.push({ ...base, query: [['unknown_parameter', '1']] });
  return examples;
}

function describeRequest(op: Operation, r: FuzzRequest): string {
  const body = r.body
    ? ` body(${r.body.contentType}) ${r.body.text.slice(0, 200)}${r.body.text.length > 200 ? `… (${r.body.text.length} chars)` : ''}`
    : '';
  return `${op.method} ${urlOf(op, r).slice(0, 300)}${r.signedIn ? '' : ' (no token)'}${body}`;
}

function namesAnotherPath(op: Operation, r: FuzzRequest): boolean {
  const path = urlOf(op, { ...r, query: [] });
  return new URL(path, 'http://fuzz').pathname.split('/').length !== path.split('/').length;
}

function urlOf(op: Operation, r: FuzzRequest): string {
  const path = op.path.replace(/\{([^}]+)\}/g, (_m, name: string) => r.path[name] ?? '1');
  const query = r.query.map(([k, v]) => `${encode(k)}=${encode(v)}`).join('&');
  return query ? `${path}?${query}` : path;
}

// ---------------------------------------------------------------- the runs

for (const dialect of dialects) {
  describe(`fuzzing every OpenAPI operation (${dialect})`, () => {
    let t: TestApp;
    let owner: Account;
    beforeAll(async () => {
      t = await buildTestApp(dialect, { QUIET_HOURS: '' });
      owner = await register(t.app);
    });
    afterAll(() => t.close());

    it('reads the whole document', () => {
      expect(operations.length).toBeGreaterThan(40);
    });

    for (const op of operations) {
      // The live event stream answers a signed-in request with a stream that does not end while the token works:
      // test/events-stream.test.ts tries it over real HTTP instead.
      if (op.path === '/api/events/stream') continue;
      it(`${op.method} ${op.path}`, async () => {
        const send = async (r: FuzzRequest) => {
          let token = owner.token;
          if (op.path === '/api/auth/logout') {
            // Each run signs out its own token.
            const login = await t.app.inject({
              method: 'POST',
              url: '/api/auth/login',
              payload: { email: owner.user.email, password: owner.password },
            });
            token = login.json().data.access_token;
          }
          const headers: Record<string, string> = {};
          if (r.signedIn) headers.authorization = `Bearer ${token}`;
          if (r.body) headers['content-type'] = r.body.contentType;
          const res = await t.app.inject({
            method: op.method as 'GET',
            url: urlOf(op, r),
            headers,
            ...(r.body
              ? { payload: Buffer.from(r.body.text, op.body?.type === 'multipart' ? 'latin1' : 'utf8') }
              : {}),
          });
          const status = res.statusCode;
          const what = `${status} ${res.body.slice(0, 300)}`;
          if (status >= 500) throw new Error(`answered ${what}`);
          // A path value of `..` (or `%2e%2e`) is a dot segment: every client resolves it, and the request names
          // another path (`/privacy/..` is `/`, the console's redirect). That answer is the other path's, not this
          // operation's; it is still held to the rules for every answer above and below its status.
          if (namesAnotherPath(op, r)) {
            if (!res.headers['x-request-id']) throw new Error(`no X-Request-Id: ${what}`);
            if (status >= 400 && res.json().success !== false)
              throw new Error(`error outside the envelope: ${what}`);
            return;
          }
          const documented =
            op.statuses.includes(String(status)) || op.statuses.includes(`${String(status)[0]}XX`);
          if (!documented)
            throw new Error(`undocumented status: ${what} (documented: ${op.statuses.join(', ')})`);
          if (!res.headers['x-request-id']) throw new Error(`no X-Request-Id: ${what}`);
          if (status >= 400) {
            let body: { success?: unknown; error_code?: unknown; message?: unknown };
            try {
              body = res.json();
            } catch {
              throw new Error(`error without a JSON body: ${what}`);
            }
            if (
              body.success !== false ||
              typeof body.error_code !== 'string' ||
              typeof body.message !== 'string'
            ) {
              throw new Error(`error outside the envelope: ${what}`);
            }
            if (/\bat .+\.(ts|js):\d+/.test(res.body)) throw new Error(`stack trace: ${what}`);
            if (res.body.length > MAX_ERROR_BYTES) {
              throw new Error(`error body of ${res.body.length} bytes: ${res.body.slice(0, 200)}`);
            }
          } else {
            const unknownQuery = r.query.filter(
              ([k]) => !op.parameters.some((p) => p.in === 'query' && p.name === k),
            );
            if (unknownQuery.length > 0) {
              throw new Error(`unknown query parameter ${unknownQuery[0]![0]} accepted: ${what}`);
            }
            if (r.unknownBodyKeys.length > 0)
              throw new Error(`unknown body field ${r.unknownBodyKeys[0]} accepted: ${what}`);
          }
          const health = await t.app.inject({ method: 'GET', url: '/api/healthz' });
          if (health.statusCode !== 200) throw new Error(`healthz answered ${health.statusCode} afterwards`);
        };
        const result = await fc.check(
          fc.asyncProperty(requestFor(op), async (r) => {
            await send(r);
          }),
          {
            numRuns: RUNS,
            examples: examplesFor(op).map((e) => [e] as [FuzzRequest]),
            endOnFailure: true,
            ...(SEED !== undefined ? { seed: SEED } : {}),
          },
        );
        if (result.failed) {
          const request = result.counterexample?.[0];
          const error =
            result.errorInstance instanceof Error
              ? result.errorInstance.message
              : String(result.errorInstance);
          throw new Error(
            `${request ? describeRequest(op, request) : '?'}\n  -> ${error}\n  (replay: FUZZ_SEED=${result.seed})`,
          );
        }
      }, 60_000);
    }

    // Every method on every path: the methods a path does not take, sent with any token, query and body its own
    // operations could get, are 405 naming the path's own methods.
    const byPath = new Map<string, Operation[]>();
    for (const op of operations) byPath.set(op.path, [...(byPath.get(op.path) ?? []), op]);
    for (const [path, ops] of byPath) {
      const own = METHODS.filter((m) => ops.some((o) => o.method === m));
      const others = [...METHODS.filter((m) => !own.includes(m)), 'QUERY'];
      it(`the other methods on ${path}: ${others.join(', ')}`, async () => {
        await fc.assert(
          fc.asyncProperty(requestFor(ops[0]!), fc.constantFrom(...others), async (r, method) => {
            const headers: Record<string, string> = {};
            if (r.signedIn) headers.authorization = `Bearer ${owner.token}`;
            if (r.body) headers['content-type'] = r.body.contentType;
            // Path values stay plain ids here: one such as `..` names another path (the operations' own runs
            // fuzz path values).
            const plain = { ...r, path: Object.fromEntries(Object.keys(r.path).map((k) => [k, '1'])) };
            const res = await t.app.inject({
              method: method as 'GET',
              url: urlOf(ops[0]!, plain),
              headers,
              ...(r.body ? { payload: Buffer.from(r.body.text, 'latin1') } : {}),
            });
            const what = `${method} ${describeRequest(ops[0]!, plain)} -> ${res.statusCode} ${res.body.slice(0, 200)}`;
            expect(res.statusCode, what).toBe(405);
            expect(res.headers.allow, what).toBe(own.join(', '));
            expect(res.json(), what).toMatchObject({ success: false, error_code: 'method_not_allowed' });
          }),
          { numRuns: RUNS, endOnFailure: true, ...(SEED !== undefined ? { seed: SEED } : {}) },
        );
      }, 60_000);
    }
  });
}
