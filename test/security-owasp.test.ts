/**
 * The service tried as a hostile caller would, organised by the OWASP API Security Top 10 (2023). The role
 * matrix, the workspace boundary and the inventory are checked from the route table itself
 * (registeredRoutes), so a new route is covered without anyone remembering to add it here.
 */
import { unsubscribeToken } from '../src/modules/opt-outs/unsubscribe.ts';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Role } from '../src/domain.ts';
import { type RegisteredRoute, registeredRoutes } from '../src/http/openapi.ts';
import { can, permissions } from '../src/http/permissions.ts';
import { VoterImportLoop } from '../src/modules/voter-imports/import-jobs.loop.ts';
import { VoterImportJobs } from '../src/modules/voter-imports/import-jobs.ts';
import { VoterImporter } from '../src/modules/voter-imports/voter-imports.ts';
import { newWebhookSecret, webhookSecretBox } from '../src/modules/webhooks/webhooks.secrets.ts';
import {
  type Account,
  addMember,
  type Answer,
  buildTestApp,
  call,
  dialects,
  expectError,
  importCsv,
  multipartBody,
  register,
  type TestApp,
  uniqueEmail,
  uniquePhone,
} from './helpers.ts';
import { buildProviderTestApp } from './messaging-helpers.ts';
import { startReceiver, tableResolver, workerFor } from './webhook-receivers.ts';

const PUBLIC_IP = '93.184.215.14';
const roles: Role[] = ['politician', 'manager', 'volunteer'];
const MISSING_ID = '999999999';

/** The routes a caller can reach, one per method; HEAD answers as its GET does. */
function callable(t: TestApp): RegisteredRoute[] {
  return registeredRoutes(t.app).filter((r) => r.method !== 'HEAD');
}

/**
 * The live event stream never ends while its token works, so the probes that read an answer whole leave it out;
 * test/events-stream.test.ts holds it to the same rules (another workspace hears nothing, a volunteer only theirs).
 */
const endless = (r: { url: string }) => r.url === '/api/events/stream';

function label(r: { method: string; url: string }): string {
  return `${r.method} ${r.url}`;
}

/** A route's URL with every path parameter (`:id`, `*`) filled in. */
function fill(url: string, value: (param: string, resource: string) => string): string {
  const segments = url.split('/');
  // /api/privacy/<kind>/:id: the kind names the rows (requests, breaches).
  const resource = (segments[2] === 'privacy' ? `privacy/${segments[3]}` : segments[2]) ?? '';
  return url.replace(/:([A-Za-z_]+)/g, (_m, param: string) => value(param, resource)).replace('*', 'x');
}

/**
 * What the contract lets each role do, written from the contract's words rather than from permissions.ts:
 * volunteers list, read, create and update voters and create, read and update grievances; managers do
 * everything but team, webhooks and payments; politicians everything.
 */
function contractAllows(role: Role, route: RegisteredRoute): boolean {
  if (route.permission === 'public' || route.permission === 'authenticated') return true;
  if (role === 'politician') return true;
  // The fourth part: managers list the team (id, name, role, active, coverage) to assign conversations.
  if (role === 'manager' && label(route) === 'GET /api/users') return true;
  // The fifth part: an account's channel log is read by politicians and managers.
  if (role === 'manager' && label(route) === 'GET /api/channel-accounts/:id/log') return true;
  const politicianOnly = [
    '/api/users',
    '/api/webhooks',
    '/api/payments',
    '/api/audit-log',
    '/api/channel-accounts',
    // The fourth part: custom voter fields are the politician's to define (everyone reads them).
    '/api/voter-fields',
  ];
  if (politicianOnly.some((p) => route.url === p || route.url.startsWith(`${p}/`))) return false;
  // The workspace's own settings (its time zone, its name): the politician's, as the team and accounts are.
  if (label(route) === 'PATCH /api/workspace') return false;
  // The fourth part's personal data: the notice, a person's export and erasure, and the breach register are the
  // politician's; managers answer data-principal requests.
  if (
    [
      'PUT /api/privacy/notice',
      'GET /api/privacy/requests/:id/export',
      'POST /api/privacy/requests/:id/erase',
    ].includes(label(route)) ||
    route.url.startsWith('/api/privacy/breaches')
  )
    return false;
  if (role === 'manager') return true;
  return [
    'GET /api/voters',
    'GET /api/voters/:id',
    'POST /api/voters',
    'PUT /api/voters/:id',
    'GET /api/grievances',
    'GET /api/grievances/:id',
    'POST /api/grievances',
    'PATCH /api/grievances/:id',
    // Their own conversations (the service scopes them), and the quick replies to answer with.
    'GET /api/conversations',
    'GET /api/conversations/:id',
    'GET /api/conversations/:id/messages',
    'POST /api/conversations/:id/reply',
    'PATCH /api/conversations/:id',
    'POST /api/conversations/:id/grievance',
    // The fifth part: the assignee links their conversation to a voter of their part of the roll.
    'POST /api/conversations/:id/voter',
    'GET /api/quick-replies',
    // The fourth part's field work: their own turfs, walk lists and progress; visits and marks for those voters.
    'GET /api/turfs',
    'GET /api/turfs/:id',
    'GET /api/turfs/:id/walk-list',
    'GET /api/turfs/:id/progress',
    'POST /api/visits',
    'GET /api/visits',
    'POST /api/poll-day/marks',
  ].includes(label(route));
}

/** What the guard lets the role do: public routes need no token at all; the rest the role's permission. */
function allows(role: Role, route: RegisteredRoute): boolean {
  return route.permission === 'public' || can(role, route.permission!);
}

function expectEnvelope(res: Answer, what: string): void {
  expect(res.status, `${what}: ${res.raw.slice(0, 300)}`).toBeGreaterThanOrEqual(400);
  expect(res.status, `${what}: ${res.raw.slice(0, 300)}`).toBeLessThan(500);
  expect(res.body, `${what}: ${res.raw.slice(0, 300)}`).toMatchObject({ success: false });
  expect(typeof res.body.error_code, what).toBe('string');
  expect(typeof res.body.message, what).toBe('string');
  expect(res.headers['x-request-id'], what).toBeTruthy();
}

async function login(t: TestApp, account: Account): Promise<string> {
  const res = await call(t.app, 'POST', '/api/auth/login', {
    body: { email: account.user.email, password: account.password },
  });
  if (res.status !== 200) throw new Error(`login failed: ${res.status} ${res.raw}`);
  return res.body.data.access_token as string;
}

for (const dialect of dialects) {
  describe(`OWASP API Security Top 10 (2023) (${dialect})`, () => {
    let t: TestApp;
    let owner: Account;
    const team = {} as Record<Role, Account>;
    let stranger: Account;
    const marker = `Marker${randomUUID().slice(0, 8)}`;
    const ids: Record<string, string> = {};

    beforeAll(async () => {
      t = await buildTestApp(
        dialect,
        { WEBHOOK_ALLOW_PRIVATE_URLS: 'false', QUIET_HOURS: '' },
        { webhookResolver: tableResolver({ 'hooks.example.com': [PUBLIC_IP] }) },
      );
      owner = await register(t.app, { name: `${marker} Owner` });
      team.politician = owner;
      team.manager = await addMember(t.app, owner, 'manager');
      team.volunteer = await addMember(t.app, owner, 'volunteer');
      stranger = await register(t.app);
      ids.users = String(team.volunteer.user.id);
      // /api/user/tokens/:id: one of the owner's own tokens.
      ids.user = owner.token.split('|')[0] as string;

      // One of everything in the owner's workspace, each carrying the marker.
      const token = owner.token;
      const created = async (method: string, url: string, body?: unknown) => {
        const res = await call(t.app, method, url, { token, body });
        if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${res.raw}`);
        return res.body.data;
      };
      ids.voters = String(
        (await created('POST', '/api/voters', { name: `${marker} Voter`, phone: uniquePhone() })).id,
      );
      // A finished voter import job (its errors.csv answers only once the job is done).
      const upload = multipartBody([
        { name: 'file', content: `name,phone\n${marker} Imported,${uniquePhone()}\n` },
      ]);
      const queued = await t.app.inject({
        method: 'POST',
        url: '/api/voters/import',
        headers: {
          'content-type': upload.contentType,
          authorization: `Bearer ${token}`,
          prefer: 'respond-async',
        },
        payload: upload.payload,
      });
      ids.import_id = queued.json().data.id;
      const importer = new VoterImporter({
        db: t.db,
        defaultCountry: 'IN',
        maxBytes: 1 << 20,
        maxErrors: 10,
        appKey: t.config.appKey,
      });
      await new VoterImportLoop({
        db: t.db,
        jobs: new VoterImportJobs({ db: t.db, importer, maxBytes: 1 << 20 }),
        log: console,
        workspaceIds: [owner.user.workspace_id],
      }).runOnce();
      ids.segments = String(
        (await created('POST', '/api/segments', { name: `${marker} Segment`, filters: {} })).id,
      );
      ids.grievances = String(
        (await created('POST', '/api/grievances', { title: `${marker} Grievance` })).id,
      );
      const hook = await created('POST', '/api/webhooks', {
        url: 'https://hooks.example.com/ces',
        description: `${marker} Hook`,
      });
      ids.webhooks = String(hook.id);
      await created('POST', `/api/webhooks/${hook.id}/test`);
      const deliveries = await created('GET', `/api/webhooks/${hook.id}/deliveries`);
      ids.delivery_id = String(deliveries.data[0].id);
      ids.payments = String((await created('POST', '/api/payments', { sms_credits: 10 })).payment.id);
      ids.campaigns = String(
        (
          await created('POST', '/api/campaigns', {
            name: `${marker} Campaign`,
            channel: 'sms',
            message: `${marker} message`,
            recipients: [uniquePhone()],
          })
        ).id,
      );
      ids.messages = String(
        (await created('POST', '/api/messages/send', { channel: 'sms', to: uniquePhone(), message: marker }))
          .id,
      );
      ids['opt-outs'] = String(
        (await created('POST', '/api/opt-outs', { address: uniquePhone(), channel: 'sms', reason: marker }))
          .id,
      );
      ids.templates = String(
        (
          await created('POST', '/api/templates', {
            name: marker,
            channel: 'sms',
            body: `${marker} {{name}}`,
          })
        ).id,
      );
      // A channel account, not the default: the owner's messages above keep going through the sandbox.
      ids['channel-accounts'] = String(
        (
          await created('POST', '/api/channel-accounts', {
            name: marker,
            provider: 'msg91',
            settings: { sender: 'CESOWS' },
            credentials: { authkey: 'SECRET-AUTHKEY-owasp' },
          })
        ).id,
      );
      // A conversation (a reply the workspace reports) and a quick reply.
      const contact = uniquePhone();
      await created('POST', '/api/inbound', { channel: 'sms', from: contact, body: marker });
      ids.conversations = String(
        (
          await t.db.kysely
            .selectFrom('conversations')
            .select('id')
            .where('address', '=', contact)
            .executeTakeFirstOrThrow()
        ).id,
      );
      ids['quick-replies'] = String(
        (await created('POST', '/api/quick-replies', { title: marker, body: marker })).id,
      );
      // The one-click unsubscribe page of an address of the owner's workspace (public, signed link).
      ids.token = unsubscribeToken(t.config.appKey, owner.user.workspace_id, `${marker}@example.org`);
      ids['silence-periods'] = String(
        (
          await created('POST', '/api/silence-periods', {
            constituency: `${marker} Constituency`,
            starts_at: '2030-01-01T00:00:00Z',
            ends_at: '2030-01-03T00:00:00Z',
          })
        ).id,
      );
      ids.places = String(
        (await created('POST', '/api/places', { kind: 'ward', name: `${marker} ward` })).id,
      );
      ids.key = (
        await created('POST', '/api/voter-fields', { key: 'owasp_field', label: 'x', type: 'text' })
      ).key;
      ids.job_id = String((await created('POST', '/api/voters/tags', { add: ['owasp'], filters: {} })).id);
      ids.surveys = (
        await created('POST', '/api/surveys', {
          name: marker,
          questions: [{ key: 'q', type: 'text', text: { en: marker } }],
        })
      ).id;
      ids.turfs = (
        await created('POST', '/api/turfs', { name: marker, filters: { ward: `${marker} ward` } })
      ).id;
      ids['privacy/requests'] = (
        await created('POST', '/api/privacy/requests', { type: 'erasure', address: `${marker}@example.org` })
      ).id;
      ids['privacy/breaches'] = (
        await created('POST', '/api/privacy/breaches', {
          detected_at: '2026-01-01T00:00:00Z',
          description: marker,
        })
      ).id;
      ids.publicId = (await call(t.app, 'GET', '/api/workspace', { token: owner.token })).body.data.public_id;
      ids['survey-runs'] =
        // WhatsApp (the sandbox's): SMS goes through the MSG91 account above, which needs a template per question.
        (
          await created('POST', `/api/surveys/${ids.surveys}/runs`, {
            channel: 'whatsapp',
            recipients: [uniquePhone()],
            scheduled_at: '2030-01-01T00:00:00Z',
          })
        ).id;
    });
    afterAll(() => t.close());

    /** The owner's row for a path parameter, by the route's first segment (`/api/<resource>/...`). */
    const ownersId = (param: string, resource: string): string => {
      const id = param === 'id' ? ids[resource] : ids[param];
      if (!id) throw new Error(`no row of the owner for :${param} of /api/${resource}: add one in beforeAll`);
      return id;
    };

    /** A body that is valid for the route where one is needed, so only the ownership check can refuse it. */
    const validBody = (route: RegisteredRoute): unknown => {
      const bodies: Record<string, unknown> = {
        'PUT /api/voters/:id': { name: 'Taken Over' },
        'PATCH /api/grievances/:id': { title: 'Taken over' },
        'PATCH /api/webhooks/:id': { description: 'Taken over' },
        'PATCH /api/segments/:id': { name: 'Taken over' },
        'PATCH /api/campaigns/:id': { name: 'Taken over' },
        'PATCH /api/users/:id': { name: 'Taken over' },
        'PATCH /api/templates/:id': { name: 'Taken over' },
        'PATCH /api/channel-accounts/:id': { name: 'Taken over' },
        'PATCH /api/conversations/:id': { status: 'closed' },
        'POST /api/conversations/:id/reply': { message: 'Taken over' },
        'POST /api/conversations/:id/grievance': { title: 'Taken over' },
        'POST /api/conversations/:id/voter': { voter_id: 1 },
        'PATCH /api/quick-replies/:id': { title: 'Taken over' },
        'POST /api/channel-accounts/:id/test': { to: '+919812345678' },
        'PATCH /api/places/:id': { name: 'Taken over' },
        'PATCH /api/surveys/:id': { name: 'Taken over' },
        'POST /api/surveys/:id/runs': { channel: 'sms', recipients: ['+919812345678'] },
        'PATCH /api/voter-fields/:key': { label: 'Taken over' },
        'PATCH /api/turfs/:id': { name: 'Taken over' },
        'PATCH /api/privacy/requests/:id': { note: 'Taken over' },
        'PATCH /api/privacy/breaches/:id': { description: 'Taken over' },
      };
      return bodies[label(route)];
    };

    describe('API1 Broken Object Level Authorization', () => {
      it("every route with an id answers another workspace's row as not found, and changes nothing", async () => {
        const withIds = callable(t).filter((r) => r.url.includes(':') && r.permission !== 'public');
        expect(withIds.length).toBeGreaterThan(10);
        for (const route of withIds) {
          const url = fill(route.url, ownersId);
          // The owner reaches it (so the 404 below is about ownership, not a wrong id).
          if (route.method === 'GET') {
            expect((await call(t.app, 'GET', url, { token: owner.token })).status, url).toBe(200);
          }
          const res = await call(t.app, route.method, url, { token: stranger.token, body: validBody(route) });
          expectError(res, 404, 'not_found');
        }
        const voter = await call(t.app, 'GET', `/api/voters/${ids.voters}`, { token: owner.token });
        expect(voter.body.data.name).toBe(`${marker} Voter`);
        for (const resource of [
          'segments',
          'grievances',
          'webhooks',
          'payments',
          'campaigns',
          'places',
          'turfs',
        ]) {
          const res = await call(t.app, 'GET', `/api/${resource}/${ids[resource]}`, { token: owner.token });
          expect(res.status, resource).toBe(200);
          expect(res.raw).not.toContain('Taken');
        }
      });

      it("no list, export or read without an id shows another workspace's rows", async () => {
        const lists = callable(t).filter(
          (r) =>
            r.method === 'GET' &&
            !r.url.includes(':') &&
            r.permission !== 'public' &&
            !r.hidden &&
            !endless(r),
        );
        expect(lists.length).toBeGreaterThan(8);
        for (const route of lists) {
          const mine = await call(t.app, 'GET', route.url, { token: owner.token });
          const theirs = await call(t.app, 'GET', route.url, { token: stranger.token });
          expect(theirs.status, route.url).toBe(200);
          expect(theirs.raw, route.url).not.toContain(marker);
          if (['/api/voters', '/api/grievances', '/api/campaigns', '/api/segments'].includes(route.url)) {
            expect(mine.raw, route.url).toContain(marker);
          }
        }
      });

      it("a volunteer reaches no conversation but their own: every conversation route with an id answers another volunteer's as not found, and changes nothing", async () => {
        const other = await addMember(t.app, owner, 'volunteer');
        const assigned = await call(t.app, 'PATCH', `/api/conversations/conv_${ids.conversations}`, {
          token: owner.token,
          body: { assigned_to: other.user.id },
        });
        expect(assigned.status).toBe(200);
        const routes = callable(t).filter((r) => r.url.startsWith('/api/conversations/:id'));
        expect(routes.length).toBeGreaterThanOrEqual(5);
        for (const route of routes) {
          const url = fill(route.url, () => `conv_${ids.conversations}`);
          // Its assignee reaches it (so the 404 below is about assignment, not a wrong id).
          if (route.method === 'GET')
            expect((await call(t.app, 'GET', url, { token: other.token })).status, url).toBe(200);
          const res = await call(t.app, route.method, url, {
            token: team.volunteer.token,
            body: validBody(route),
          });
          expectError(res, 404, 'not_found');
        }
        const list = await call(t.app, 'GET', '/api/conversations', { token: team.volunteer.token });
        expect(list.raw).not.toContain(marker);
        const after = await call(t.app, 'GET', `/api/conversations/conv_${ids.conversations}`, {
          token: owner.token,
        });
        expect(after.body.data).toMatchObject({
          status: 'open',
          assigned_to: other.user.id,
          grievance_id: null,
        });
        expect(
          (
            await call(t.app, 'GET', `/api/conversations/conv_${ids.conversations}/messages`, {
              token: other.token,
            })
          ).body.data.data,
        ).toHaveLength(1);
      });

      it("a segment or broadcast cannot reach another workspace's voters", async () => {
        const res = await call(t.app, 'POST', '/api/messages/broadcast', {
          token: stranger.token,
          body: { channel: 'sms', message: 'hi', segment_id: ids.segments },
        });
        expect([404, 422]).toContain(res.status);
        expectEnvelope(res, 'broadcast to a foreign segment');
        const grievance = await call(t.app, 'POST', '/api/grievances', {
          token: stranger.token,
          body: { title: 'x', voter_id: Number(ids.voters), assigned_to: owner.user.id },
        });
        expectEnvelope(grievance, 'grievance naming a foreign voter and user');
      });
    });

    describe('API2 Broken Authentication', () => {
      it('refuses missing, malformed, forged and revoked tokens with 401 unauthorized', async () => {
        const [tokenId, secret] = owner.token.split('|') as [string, string];
        for (const authorization of [
          '',
          'Bearer',
          'Bearer ',
          `Basic ${Buffer.from('a:b').toString('base64')}`,
          `Bearer ${tokenId}`,
          `Bearer ${tokenId}|`,
          `Bearer ${tokenId}|${secret.slice(0, -1)}${secret.endsWith('x') ? 'y' : 'x'}`,
          `Bearer ${owner.token}x`,
          `Bearer ${Number(tokenId) + 100000}|${secret}`,
          `Bearer ' OR '1'='1`,
          `Bearer 1 OR 1=1|${secret}`,
          `Bearer -1|${secret}`,
          `Bearer ${'9'.repeat(400)}|${secret}`,
          `Bearer ${'a'.repeat(8000)}`,
        ]) {
          const res = await call(t.app, 'GET', '/api/user', { headers: { authorization } });
          expectError(res, 401, 'unauthorized');
        }
        const token = await login(t, owner);
        expect((await call(t.app, 'POST', '/api/auth/logout', { token })).status).toBe(200);
        expectError(await call(t.app, 'GET', '/api/user', { token }), 401, 'unauthorized');
      });

      it('login does not tell a wrong password from an unknown email', async () => {
        const wrong = await call(t.app, 'POST', '/api/auth/login', {
          body: { email: owner.user.email, password: 'not the password' },
        });
        const unknown = await call(t.app, 'POST', '/api/auth/login', {
          body: { email: uniqueEmail('nobody'), password: 'not the password' },
        });
        expectError(wrong, 401, 'unauthorized');
        expectError(unknown, 401, 'unauthorized');
        expect(wrong.body.message).toBe(unknown.body.message);
      });

      it('stores passwords as argon2id and tokens as SHA-256 only', async () => {
        const user = await t.db.kysely
          .selectFrom('users')
          .select('password_hash')
          .where('id', '=', owner.user.id)
          .executeTakeFirstOrThrow();
        expect(user.password_hash).toMatch(/^\$argon2id\$/);
        expect(user.password_hash).not.toContain(owner.password);
        const [tokenId, secret] = owner.token.split('|') as [string, string];
        const row = await t.db.kysely
          .selectFrom('api_tokens')
          .select('token_hash')
          .where('id', '=', Number(tokenId))
          .executeTakeFirstOrThrow();
        expect(row.token_hash).toMatch(/^[0-9a-f]{64}$/);
        expect(row.token_hash).not.toContain(secret);
      });

      it('refuses common and blank passwords (at least 8 characters is not enough)', async () => {
        for (const password of ['12345678', '        ', 'password', 'qwertyuiop', '11111111']) {
          const res = await call(t.app, 'POST', '/api/auth/register', {
            body: { name: 'Weak', email: uniqueEmail('weak'), password },
          });
          expectError(res, 422, 'validation_error');
          expect(Object.keys(res.body.details), JSON.stringify(password)).toContain('password');
        }
      });

      it('send-otp answers the same for a registered and an unknown phone, in the same time', async () => {
        const known = owner.user.phone as string;
        const unknown = uniquePhone();
        const a = await call(t.app, 'POST', '/api/auth/send-otp', { body: { phone: known } });
        const b = await call(t.app, 'POST', '/api/auth/send-otp', { body: { phone: unknown } });
        expect(a.status).toBe(200);
        expect(a.raw).toBe(b.raw);
        // A provider with a 300 ms round trip must not show in the answer's time (an account oracle).
        const sms = t.providers.sms;
        const send = sms.send.bind(sms);
        sms.send = async (message) => {
          await new Promise((r) => setTimeout(r, 300));
          return send(message);
        };
        try {
          const time = async (phone: string) => {
            const start = performance.now();
            await call(t.app, 'POST', '/api/auth/send-otp', { body: { phone } });
            return performance.now() - start;
          };
          const knownMs = Math.min(await time(known), await time(known));
          const unknownMs = Math.min(await time(unknown), await time(unknown));
          expect(Math.abs(knownMs - unknownMs), `known ${knownMs} ms, unknown ${unknownMs} ms`).toBeLessThan(
            150,
          );
        } finally {
          sms.send = send;
        }
      });

      it('rate limits failed authentication and unknown paths per client address', async () => {
        const own = await buildTestApp(dialect, {
          RATE_LIMIT_PUBLIC_PER_MIN: '5',
          RATE_LIMIT_AUTH_PER_MIN: '5',
          RATE_LIMIT_AUTH_FAILED_PER_MIN: '30',
        });
        try {
          const badToken: Answer[] = [];
          for (let i = 0; i < 150; i++) {
            badToken.push(
              await call(own.app, 'GET', '/api/voters', {
                headers: { authorization: `Bearer ${i}|guess${i}` },
              }),
            );
          }
          const limited = badToken.find((r) => r.status === 429);
          expect(limited, 'no 429 after 150 bad tokens from one address').toBeDefined();
          expectError(limited!, 429, 'rate_limit_exceeded');
          expect(limited!.headers['retry-after']).toBeTruthy();
          const unknown: number[] = [];
          for (let i = 0; i < 150; i++)
            unknown.push((await call(own.app, 'GET', `/api/nowhere/${i}`)).status);
          expect(unknown, 'no 429 after 150 unknown paths from one address').toContain(429);
        } finally {
          await own.close();
        }
      });
    });

    describe('API3 Broken Object Property Level Authorization', () => {
      it('refuses fields a caller may not set (mass assignment), naming each', async () => {
        const cases: Array<[string, string, Record<string, unknown>, string[], string?]> = [
          [
            'POST',
            '/api/auth/register',
            {
              name: 'Mass',
              email: uniqueEmail(),
              password: 'a fine long password',
              role: 'manager',
              workspace_id: owner.user.workspace_id,
              credits: { sms_credits: 1e9 },
            },
            ['role', 'workspace_id', 'credits'],
          ],
          [
            'POST',
            '/api/users',
            {
              name: 'Elsewhere',
              email: uniqueEmail(),
              password: 'a fine long password',
              role: 'manager',
              workspace_id: stranger.user.workspace_id,
            },
            ['workspace_id'],
            owner.token,
          ],
          [
            'PUT',
            `/api/voters/${ids.voters}`,
            { workspace_id: stranger.user.workspace_id, id: 1, created_at: '2020-01-01T00:00:00Z' },
            ['workspace_id', 'id', 'created_at'],
            owner.token,
          ],
          ['PATCH', `/api/webhooks/${ids.webhooks}`, { secret: 'whsec_mine' }, ['secret'], owner.token],
          [
            'POST',
            '/api/payments',
            { sms_credits: 1, status: 'completed', amount_paid: 0 },
            ['status', 'amount_paid'],
            owner.token,
          ],
        ];
        for (const [method, url, body, fields, token] of cases) {
          const res = await call(t.app, method, url, { token, body });
          expectError(res, 422, 'validation_error');
          for (const field of fields)
            expect(Object.keys(res.body.details), `${method} ${url}`).toContain(field);
        }
      });

      it('never answers with a password hash, token hash, stored secret or OTP hash', async () => {
        const answers: string[] = [];
        // (A channel account's callbacks answer providers, with the account's token in the URL.)
        for (const route of callable(t).filter(
          // (GET /api/channel-accounts/providers names the providers' credential fields, SMTP's `password` among
          // them: names, never values.)
          (r) =>
            r.method === 'GET' &&
            !r.hidden &&
            !r.url.includes(':token/') &&
            !endless(r) &&
            r.url !== '/api/channel-accounts/providers',
        )) {
          const url = fill(route.url, ownersId);
          answers.push((await call(t.app, 'GET', url, { token: owner.token })).raw);
        }
        answers.push(
          (
            await call(t.app, 'POST', '/api/auth/login', {
              body: { ...owner.user, password: owner.password },
            })
          ).raw,
        );
        const all = answers.join('\n');
        for (const secret of [
          'password',
          '$argon2',
          'token_hash',
          'secret_encrypted',
          'code_hash',
          'whsec_',
          'SECRET-AUTHKEY',
        ]) {
          expect(all).not.toContain(secret);
        }
        const list = await call(t.app, 'GET', '/api/voters', { token: team.volunteer.token });
        for (const item of list.body.data.data) {
          expect(Object.keys(item).sort()).toEqual(['booth', 'constituency', 'id', 'name', 'phone', 'ward']);
        }
      });

      it('a body field named after an Object.prototype member is a 422 naming it, never a 500', async () => {
        for (const key of [
          'toString',
          'constructor',
          'hasOwnProperty',
          'valueOf',
          '__defineGetter__',
          '__proto__',
        ]) {
          const body = `{"email":"a@b.co","password":"x","${key}":"y"}`;
          const res = await call(t.app, 'POST', '/api/auth/login', { body });
          expectEnvelope(res, `login with ${key}`);
          const filters = await call(
            t.app,
            'GET',
            `/api/voters/export?filters=${encodeURIComponent(`{"${key}":"x"}`)}`,
            { token: owner.token },
          );
          expectError(filters, 422, 'validation_error');
        }
      });
    });

    describe('API4 Unrestricted Resource Consumption', () => {
      it('refuses oversized bodies, files, pages and recipient lists before doing the work', async () => {
        const own = await buildTestApp(dialect, {
          BODY_LIMIT_BYTES: '4096',
          IMPORT_MAX_BYTES: '2048',
          BROADCAST_MAX_RECIPIENTS: '10',
        });
        try {
          const boss = await register(own.app);
          expectError(
            await call(own.app, 'POST', '/api/voters', {
              token: boss.token,
              body: { name: 'x'.repeat(5000), phone: uniquePhone() },
            }),
            413,
            'payload_too_large',
          );
          const csv = `name,phone\n${Array.from({ length: 200 }, (_, i) => `Voter ${i},+9198${String(i).padStart(8, '0')}`).join('\n')}`;
          expectError(await importCsv(own.app, boss.token, csv), 413, 'payload_too_large');
          expectError(
            await call(own.app, 'GET', '/api/voters?per_page=101', { token: boss.token }),
            422,
            'validation_error',
          );
          const recipients = Array.from({ length: 11 }, () => uniquePhone());
          expectError(
            await call(own.app, 'POST', '/api/messages/broadcast', {
              token: boss.token,
              body: { channel: 'sms', message: 'hi', recipients },
            }),
            422,
            'validation_error',
          );
        } finally {
          await own.close();
        }
      });

      it('caps error bodies: 50,000 unknown fields or bad recipients answer a short 422', async () => {
        const fields = Object.fromEntries(Array.from({ length: 50_000 }, (_, i) => [`f${i}`, 1]));
        const login = await call(t.app, 'POST', '/api/auth/login', {
          body: { email: 'a@b.co', password: 'x', ...fields },
        });
        expectError(login, 422, 'validation_error');
        expect(login.raw.length).toBeLessThan(64 * 1024);
        const broadcast = await call(t.app, 'POST', '/api/messages/broadcast', {
          token: owner.token,
          body: { channel: 'sms', message: 'hi', recipients: Array.from({ length: 50_000 }, () => 'x') },
        });
        expectError(broadcast, 422, 'validation_error');
        expect(broadcast.raw.length).toBeLessThan(64 * 1024);
      });

      it('deeply nested JSON gets the envelope, not a crash', async () => {
        const deep = `{"email":${'['.repeat(100_000)}${']'.repeat(100_000)},"password":"x"}`;
        expectEnvelope(await call(t.app, 'POST', '/api/auth/login', { body: deep }), 'deep JSON');
      });

      it('ids longer than 100 characters get the envelope and X-Request-Id', async () => {
        for (const url of [`/api/voters/${'1'.repeat(101)}`, `/api/campaigns/camp_${'9'.repeat(300)}`]) {
          expectEnvelope(await call(t.app, 'GET', url, { token: owner.token }), url);
        }
      });

      it('rate limits signed-in users per user', async () => {
        const own = await buildTestApp(dialect, { RATE_LIMIT_AUTHENTICATED_PER_MIN: '3' });
        try {
          const boss = await register(own.app);
          const answers: Answer[] = [];
          for (let i = 0; i < 4; i++)
            answers.push(await call(own.app, 'GET', '/api/user', { token: boss.token }));
          expect(answers[0]!.headers['x-ratelimit-limit']).toBe('3');
          expectError(answers[3]!, 429, 'rate_limit_exceeded');
          expect(Number(answers[3]!.headers['retry-after'])).toBeGreaterThan(0);
        } finally {
          await own.close();
        }
      });
    });

    describe('API5 Broken Function Level Authorization', () => {
      it('every route declares a known permission, and the declared one matches the contract for every role', () => {
        const routes = callable(t);
        expect(routes.length).toBeGreaterThan(40);
        for (const route of routes) {
          expect(permissions, label(route)).toContain(route.permission);
          for (const role of roles) {
            expect(allows(role, route), `${role} on ${label(route)} (${route.permission})`).toBe(
              contractAllows(role, route),
            );
          }
        }
      });

      it('every route, with no token, with a bad token and with each role, answers as its permission says', async () => {
        // Tokens of their own: a route may revoke the one it is called with (logout).
        const tokens = {} as Record<Role, string>;
        for (const role of roles) tokens[role] = await login(t, team[role]);
        const fresh = async (role: Role) => {
          // A route may have revoked the token (logout): sign in again.
          if ((await call(t.app, 'GET', '/api/user', { token: tokens[role] })).status === 401) {
            tokens[role] = await login(t, team[role]);
          }
        };
        for (const route of callable(t)) {
          const url = fill(route.url, () => MISSING_ID);
          for (const prefix of ['/api/', '/api/v1/']) {
            const versioned = url.replace(/^\/api\//, prefix);
            const anonymous = await call(t.app, route.method, versioned);
            const forged = await call(t.app, route.method, versioned, { token: '1|forged' });
            if (route.url.includes('/:token/')) {
              // A channel account's callback URL: its secret token is the credential, and a wrong one is 401.
              expectError(anonymous, 401, 'unauthorized');
            } else if (route.permission === 'public') {
              expect(anonymous.status, `anonymous ${route.method} ${versioned}`).not.toBe(401);
              expect(anonymous.status, `anonymous ${route.method} ${versioned}`).not.toBe(403);
            } else {
              expectError(anonymous, 401, 'unauthorized');
              expectError(forged, 401, 'unauthorized');
            }
          }
          for (const role of roles) {
            if (endless(route)) continue; // any signed-in user: it would stream for good
            await fresh(role);
            const res = await call(t.app, route.method, url, { token: tokens[role] });
            const what = `${role} ${route.method} ${url} (${route.permission}): ${res.status} ${res.raw.slice(0, 200)}`;
            if (route.url.includes('/:token/')) {
              expectError(res, 401, 'unauthorized'); // the URL's token, not the bearer, is its credential
            } else if (allows(role, route)) {
              expect([401, 403], what).not.toContain(res.status);
              expect(res.status, what).toBeLessThan(500);
            } else {
              expectError(res, 403, 'forbidden');
            }
          }
        }
      });
    });

    describe('API6 Unrestricted Access to Sensitive Business Flows', () => {
      it('an OTP takes OTP_MAX_ATTEMPTS guesses in all, even sent at once; the right code after them fails', async () => {
        const own = await buildTestApp(dialect, { OTP_MAX_ATTEMPTS: '3' });
        try {
          const phone = uniquePhone();
          await register(own.app, { phone });
          expect((await call(own.app, 'POST', '/api/auth/send-otp', { body: { phone } })).status).toBe(200);
          // send-otp answers before the code goes out: wait for the SMS.
          const sent = await vi.waitFor(() => {
            const last = own.providers.sms.sent.filter((m) => m.to === phone).at(-1);
            if (!last) throw new Error('no SMS yet');
            return last;
          });
          const code = /\b(\d{6})\b/.exec(sent?.body ?? '')?.[1] as string;
          const wrong = (i: number) => String((Number(code) + 1 + i) % 1_000_000).padStart(6, '0');
          const guesses = await Promise.all(
            [...Array.from({ length: 30 }, (_, i) => wrong(i)), code].map((otp) =>
              call(own.app, 'POST', '/api/auth/verify-otp', { body: { phone, otp } }),
            ),
          );
          expect(guesses.filter((g) => g.status === 200)).toHaveLength(0);
          const row = await own.db.kysely
            .selectFrom('otp_codes')
            .select('attempts')
            .where('phone', '=', phone)
            .executeTakeFirstOrThrow();
          expect(Number(row.attempts)).toBeLessThanOrEqual(3);
        } finally {
          await own.close();
        }
      });

      it('a broadcast beyond the credits is 402 and spends nothing; a replayed payment buys once', async () => {
        const own = await buildTestApp(dialect, { SIGNUP_CREDITS_SMS: '2', QUIET_HOURS: '' });
        try {
          const boss = await register(own.app);
          const before = (await call(own.app, 'GET', '/api/user', { token: boss.token })).body.data.credits;
          const res = await call(own.app, 'POST', '/api/messages/broadcast', {
            token: boss.token,
            body: {
              channel: 'sms',
              message: 'hi',
              recipients: [uniquePhone(), uniquePhone(), uniquePhone()],
            },
          });
          expectError(res, 402, 'insufficient_credits');
          const after = (await call(own.app, 'GET', '/api/user', { token: boss.token })).body.data.credits;
          expect(after).toEqual(before);
          const key = randomUUID();
          for (let i = 0; i < 3; i++) {
            const paid = await call(own.app, 'POST', '/api/payments', {
              token: boss.token,
              headers: { 'idempotency-key': key },
              body: { sms_credits: 100 },
            });
            expect(paid.status).toBe(201);
          }
          const credits = (await call(own.app, 'GET', '/api/user', { token: boss.token })).body.data.credits;
          expect(credits.sms_credits).toBe(before.sms_credits + 100);
        } finally {
          await own.close();
        }
      });

      it('sign-in is limited per email (RATE_LIMIT_AUTH_PER_MIN) and per address (RATE_LIMIT_AUTH_IP_PER_MIN)', async () => {
        const own = await buildTestApp(dialect, {
          RATE_LIMIT_AUTH_PER_MIN: '3',
          RATE_LIMIT_AUTH_IP_PER_MIN: '6',
        });
        try {
          const statuses: number[] = [];
          for (let i = 0; i < 4; i++) {
            statuses.push(
              (
                await call(own.app, 'POST', '/api/auth/login', {
                  body: { email: 'a@b.co', password: 'guess' },
                })
              ).status,
            );
          }
          expect(statuses).toEqual([401, 401, 401, 429]);
          // Other emails from the same address: up to the address's own limit (6 in all), then 429.
          const others: number[] = [];
          for (let i = 0; i < 3; i++)
            others.push(
              (
                await call(own.app, 'POST', '/api/auth/login', {
                  body: { email: uniqueEmail('other'), password: 'guess' },
                })
              ).status,
            );
          expect(others).toEqual([401, 401, 429]);
          const signUp = await call(own.app, 'POST', '/api/auth/register', {
            body: { name: 'Bot', email: uniqueEmail('bot'), password: 'a fine long password' },
          });
          expectError(signUp, 429, 'rate_limit_exceeded');
        } finally {
          await own.close();
        }
      });
    });

    describe('API7 Server Side Request Forgery', () => {
      it('refuses webhook URLs that reach this machine or a private network, in every spelling', async () => {
        for (const url of [
          'http://127.0.0.1/hook',
          'http://localhost/hook',
          'http://169.254.169.254/latest/meta-data',
          'http://[::1]/hook',
          'http://[::ffff:127.0.0.1]/hook',
          'http://[64:ff9b::a00:1]/hook',
          'file:///etc/passwd',
          'gopher://127.0.0.1:6379/_INFO',
          'http://user:pass@hooks.example.com/hook',
          // IPv6 forms that embed a loopback IPv4 address (issue 11, defect 16).
          'http://[::127.0.0.1]/hook',
          'http://[::ffff:0:7f00:1]/hook',
          'http://[2002:7f00:1::]/hook',
          'http://[64:ff9b:1::7f00:1]/hook',
        ]) {
          const res = await call(t.app, 'POST', '/api/webhooks', { token: owner.token, body: { url } });
          expect(res.status, url).toBe(422);
          expectError(res, 422, 'validation_error');
        }
      });

      it('media URLs must be https', async () => {
        const res = await call(t.app, 'POST', '/api/messages/send', {
          token: owner.token,
          body: {
            channel: 'whatsapp',
            to: uniquePhone(),
            message: 'hi',
            media_url: 'http://127.0.0.1/x.png',
          },
        });
        expectError(res, 422, 'validation_error');
      });

      it('a webhook receiver cannot redirect a delivery elsewhere', async () => {
        const inner = await startReceiver();
        const outer = await startReceiver((_n, res) => {
          res.setHeader('location', inner.url);
          return 307;
        });
        try {
          const boss = await register(t.app);
          const now = new Date().toISOString();
          await t.db.kysely
            .insertInto('webhooks')
            .values({
              workspace_id: boss.user.workspace_id,
              url: outer.url,
              description: null,
              events: JSON.stringify(['grievance.created']),
              secret_encrypted: webhookSecretBox(t.config.appKey).seal(newWebhookSecret()),
              disabled_at: null,
              disabled_reason: null,
              created_at: now,
              updated_at: now,
            })
            .execute();
          await call(t.app, 'POST', '/api/grievances', { token: boss.token, body: { title: 'Streetlight' } });
          await workerFor(t, [boss.user.workspace_id], { allowPrivateUrls: true }).drain();
          expect(outer.received.length).toBeGreaterThan(0);
          expect(inner.connections).toBe(0);
        } finally {
          await inner.close();
          await outer.close();
        }
      });
    });

    describe('API8 Security Misconfiguration', () => {
      it('sends nosniff everywhere, no-store with tokens, and a CSP with frame protection on the docs', async () => {
        const answers: Array<[string, Answer]> = [
          ['healthz', await call(t.app, 'GET', '/api/healthz')],
          ['404', await call(t.app, 'GET', '/api/nowhere')],
          ['401', await call(t.app, 'GET', '/api/user')],
          ['422', await call(t.app, 'POST', '/api/auth/login', { body: {} })],
          ['voters', await call(t.app, 'GET', '/api/voters', { token: owner.token })],
        ];
        for (const [what, res] of answers) {
          expect(res.headers['x-content-type-options'], what).toBe('nosniff');
          expect(res.headers['x-powered-by'], what).toBeUndefined();
        }
        const login = await call(t.app, 'POST', '/api/auth/login', {
          body: { email: owner.user.email, password: owner.password },
        });
        expect(login.headers['cache-control']).toMatch(/no-store/);
        const page = await call(t.app, 'GET', '/api/docs');
        expect(page.status).toBe(200);
        expect(page.headers['content-security-policy']).toBeTruthy();
        expect(
          page.headers['x-frame-options'] ??
            String(page.headers['content-security-policy']).match(/frame-ancestors/),
        ).toBeTruthy();
      });

      it('a path that is not valid UTF-8 gets the envelope', async () => {
        expectEnvelope(await call(t.app, 'GET', '/api/voters/%ff%fe', { token: owner.token }), 'bad UTF-8');
        expectEnvelope(await call(t.app, 'GET', '/api/%c0%af'), 'overlong UTF-8');
      });

      it('an unknown query parameter is a 422 naming it', async () => {
        const unknown = await call(t.app, 'GET', '/api/voters?colour=red', { token: owner.token });
        expectError(unknown, 422, 'validation_error');
        expect(Object.keys(unknown.body.details)).toContain('colour');
      });

      it('odd methods and junk JSON get a short envelope', async () => {
        expectEnvelope(await call(t.app, 'TRACE', '/api/voters'), 'TRACE');
        expectEnvelope(await call(t.app, 'OPTIONS', '/api/voters'), 'OPTIONS');
        const junk = await call(t.app, 'POST', '/api/auth/login', {
          body: `{"email": "${'x'.repeat(100_000)}`,
        });
        expectError(junk, 400, 'bad_request');
        expect(junk.raw.length).toBeLessThan(2048);
      });

      it('has no CORS for an unknown origin by default', async () => {
        const res = await call(t.app, 'GET', '/api/healthz', { headers: { origin: 'https://evil.example' } });
        expect(res.headers['access-control-allow-origin']).toBeUndefined();
      });
    });

    describe('API9 Improper Inventory Management', () => {
      it('every route is in the OpenAPI document with its permission, and the document names no route that is not served', async () => {
        const doc = (await call(t.app, 'GET', '/api/openapi.json')).body;
        const documented = new Map<string, Record<string, unknown>>();
        for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
          for (const [method, op] of Object.entries(ops)) {
            if (['parameters', 'summary', 'description'].includes(method)) continue;
            documented.set(`${method.toUpperCase()} ${path}`, op as Record<string, unknown>);
          }
        }
        const served = callable(t).filter((r) => !r.hidden);
        const operationIds = new Set<string>();
        for (const route of served) {
          const key = `${route.method} ${route.url.replace(/:([A-Za-z_]+)/g, '{$1}')}`;
          const op = documented.get(key);
          expect(op, `${key} is served but not documented`).toBeDefined();
          expect(op!['x-permission'], key).toBe(route.permission);
          expect(op!.operationId, key).toBeTruthy();
          expect(
            operationIds.has(op!.operationId as string),
            `duplicate operationId ${String(op!.operationId)}`,
          ).toBe(false);
          operationIds.add(op!.operationId as string);
          expect(op!.security, key).toEqual(route.permission === 'public' ? [] : [{ bearerAuth: [] }]);
          expect(
            Object.keys(op!.responses as object).some((s) => /^4/.test(s)),
            key,
          ).toBe(true);
          documented.delete(key);
        }
        expect([...documented.keys()], 'documented but not served').toEqual([]);
        // Undocumented routes are only the document itself, the reference UI and the console (the web app's
        // files, and `/` redirecting to it).
        const pages = ['/api/openapi.json', '/', '/console', '/console/*'];
        for (const route of callable(t).filter((r) => r.hidden)) {
          expect(pages.includes(route.url) || route.url.startsWith('/api/docs'), route.url).toBe(true);
        }
      });

      it('only the current version is served: /api/v2 is 404', async () => {
        for (const route of callable(t)
          .filter((r) => !r.hidden)
          .slice(0, 10)) {
          const url = fill(route.url, () => MISSING_ID).replace(/^\/api(?=\/|$)/, '/api/v2');
          expectError(await call(t.app, route.method, url, { token: owner.token }), 404, 'not_found');
        }
      });
    });

    describe('API10 Unsafe Consumption of APIs', () => {
      let provider: Server;
      let behaviour: 'not-json' | 'huge-error' | 'odd-sid' | 'stall' = 'not-json';
      let p: Awaited<ReturnType<typeof buildProviderTestApp>>;
      const TOKEN = 'twilio-test-token';
      beforeAll(async () => {
        provider = createServer((req, res) => {
          req.resume();
          req.on('end', () => {
            if (behaviour === 'stall') return;
            if (behaviour === 'not-json') {
              res.writeHead(201, { 'content-type': 'text/html' });
              return res.end('<html>Welcome to the captive portal</html>');
            }
            if (behaviour === 'odd-sid') {
              res.writeHead(201, { 'content-type': 'application/json' });
              return res.end('{"sid":{"$gt":""},"__proto__":{"polluted":true},"status":"queued"}');
            }
            res.writeHead(400, { 'content-type': 'application/json' });
            res.end(JSON.stringify({ code: 21211, message: 'x'.repeat(200_000), status: 400 }));
          });
        });
        provider.listen(0, '127.0.0.1');
        await once(provider, 'listening');
        p = await buildProviderTestApp(dialect, {
          SMS_PROVIDER: 'twilio',
          TWILIO_ACCOUNT_SID: 'AC0123456789abcdef0123456789abcdef',
          TWILIO_AUTH_TOKEN: TOKEN,
          TWILIO_API_BASE_URL: `http://127.0.0.1:${(provider.address() as AddressInfo).port}`,
          TWILIO_SMS_FROM: '+15005550006',
          PUBLIC_BASE_URL: 'https://ces.example.org',
          PROVIDER_TIMEOUT_MS: '1000',
        });
      });
      afterAll(async () => {
        await p.close();
        provider.closeAllConnections();
        provider.close();
      });

      it("a provider's odd answers are a 502 provider_error with a short message, never a 500 or a send", async () => {
        const boss = await register(p.app);
        for (const mode of ['not-json', 'odd-sid', 'huge-error'] as const) {
          behaviour = mode;
          const res = await call(p.app, 'POST', '/api/messages/send', {
            token: boss.token,
            body: { channel: 'sms', to: uniquePhone(), message: 'hi' },
          });
          expectError(res, 502, 'provider_error');
          expect(res.raw.length, mode).toBeLessThan(4096);
          expect(({} as Record<string, unknown>).polluted).toBeUndefined();
        }
        const history = await call(p.app, 'GET', '/api/messages/history', { token: boss.token });
        expect(history.body.data.data.map((m: { status: string }) => m.status)).toEqual([
          'failed',
          'failed',
          'failed',
        ]);
      });

      it('a provider that never answers costs a request PROVIDER_TIMEOUT_MS, not forever (sent, unconfirmed, never repeated)', async () => {
        const boss = await register(p.app);
        behaviour = 'stall';
        const start = Date.now();
        const res = await call(p.app, 'POST', '/api/messages/send', {
          token: boss.token,
          body: { channel: 'sms', to: uniquePhone(), message: 'hi' },
        });
        // The provider may have taken it: sent, not failed and refunded (a retried send would go twice).
        expect(res.status, res.raw).toBe(201);
        expect(res.body.data).toMatchObject({ status: 'sent', provider_message_id: null });
        expect(Date.now() - start).toBeLessThan(5000);
      }, 30_000);

      it('a status callback that is not signed, or signed and hostile, changes nothing and never fails', async () => {
        const path = '/api/providers/twilio/status?message=msg_1';
        for (const form of [
          'MessageStatus=delivered',
          '__proto__=x&constructor=y&toString=z&MessageStatus=delivered',
          `MessageStatus=${'d'.repeat(10_000)}`,
        ]) {
          const res = await call(p.app, 'POST', path, {
            body: form,
            headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': 'AAAA' },
          });
          expectError(res, 403, 'forbidden');
        }
      });
    });
  });
}
