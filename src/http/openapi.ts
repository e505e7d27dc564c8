import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance, RouteOptions } from 'fastify';
import type { Bucket } from './rate-limit.ts';
import { type Permission, rolePermissions } from './permissions.ts';
import { componentize, errorResponses, type ErrorStatus, type OpenApiDocument } from './openapi.document.ts';
import { ErrorEnvelope, PATTERNS } from './schemas.ts';
import { DOCS_CSP } from './security-headers.ts';
import { adapters } from '../providers/registry.ts';

const description = `Voter rolls, messaging over WhatsApp, SMS, email and IVR, campaigns, grievances, credits and webhooks
for campaign offices.

Every path is served under \`/api/...\` and, identically, \`/api/v1/...\`. Authenticate with
\`Authorization: Bearer <access_token>\` from login, register or verify-otp. Every answer is an envelope:
\`{ success: true, message?, data }\` or \`{ success: false, error_code, message, details? }\`; a
\`validation_error\` (422) lists each bad field in \`details\` (\`{ "phone": ["..."] }\`); a NUL character (U+0000)
in any text of a path, query or body is one. Request headers over 16 KB in all, or a request that is not valid
HTTP, are a \`bad_request\` (400) and the connection is closed. Every response carries
\`X-Request-Id\`. Rate-limited routes carry \`X-RateLimit-Limit\`, \`X-RateLimit-Remaining\` and
\`X-RateLimit-Reset\` (seconds until the window resets); a 429 adds \`Retry-After\` (seconds).`;

/** One route as registered: what the security suite iterates, so a new route is covered without a new test. */
export interface RegisteredRoute {
  method: string;
  url: string;
  permission: Permission | undefined;
  rateLimit: Bucket | undefined;
  /** Hidden from the OpenAPI document (the document itself, the reference UI's pages and assets). */
  hidden: boolean;
}

// The route objects themselves: a child context's own onRoute hook (the docs' below) runs after this one
// and may still fill in its config.
const routeTables = new WeakMap<FastifyInstance, RouteOptions[]>();

/** Every route of the app built on `app`, one entry per method (HEAD included), in registration order. */
export function registeredRoutes(app: FastifyInstance): RegisteredRoute[] {
  return (routeTables.get(app) ?? []).flatMap((route) =>
    [route.method].flat().map((method) => ({
      method: String(method).toUpperCase(),
      url: route.url,
      permission: route.config?.permission,
      rateLimit: route.config?.rateLimit,
      hidden: !route.schema || (route.schema as { hide?: boolean }).hide === true,
    })),
  );
}

/** The roles holding a permission, for the reader: "politician, manager". */
function rolesWith(permission: Permission): string {
  return Object.entries(rolePermissions)
    .filter(([, granted]) => granted.has(permission))
    .map(([role]) => role)
    .join(', ');
}

/** `post /api/webhooks/:id/deliveries/:delivery_id/retry` -> `postWebhooksIdDeliveriesDeliveryIdRetry`. */
function operationId(method: string, url: string): string {
  const words = url
    .replace(/^\/api\//, '')
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1));
  return method.toLowerCase() + words.join('');
}

/** Tags in the order a reader needs them: sign in, the voter roll, reaching voters, then the rest. */
const tagOrder = [
  { name: 'Health', description: 'Liveness and readiness, for load balancers and monitors (public).' },
  {
    name: 'Authentication',
    description: 'Register a workspace, sign in by password or OTP, and the signed-in user with the credits.',
  },
  { name: 'Users', description: "The workspace's team: managers and volunteers (politician only)." },
  {
    name: 'Voters',
    description: 'The voter roll: create, search and filter, CSV import, CSV and Excel export.',
  },
  { name: 'Segments', description: 'Saved voter filters that broadcasts and campaigns send to.' },
  {
    name: 'Surveys',
    description:
      'Ask voters questions over SMS, WhatsApp and IVR keypresses: surveys, their runs, keyword and missed-call triggers, results by booth and responses (politician, manager).',
  },
  {
    name: 'Privacy',
    description:
      "The DPDP Act 2023: the privacy notice and its public page (/privacy/<public_id>, English and Hindi), data-principal requests with their due dates, a person's export and erasure, and the breach register (docs/privacy.md).",
  },
  {
    name: 'Field work',
    description:
      'Turfs by booth and roll page, walk lists, visits synced from phones (idempotent by client_id), progress, and poll day: marks, turnout by booth and the supporters to call. Volunteers work only their own turfs.',
  },
  {
    name: 'Messaging',
    description:
      'Send one message or broadcast to many, message history, and why a message failed (`error_code`). ' +
      'Send an Idempotency-Key to make retries safe.',
  },
  {
    name: 'Campaigns',
    description:
      'Campaigns: draft, scheduled or sent at once, with live stats, their messages and retry-failed.',
  },
  {
    name: 'Credits',
    description: 'The credit ledger: every change to the balance, with its reason (politician, manager).',
  },
  {
    name: 'Grievances',
    description: "Constituents' grievances: lifecycle, priority and due dates, assignment.",
  },
  { name: 'Payments', description: 'Buying message credits (politician only).' },
  {
    name: 'Consent',
    description:
      'Opt-outs, replies and STOP keywords, one-click unsubscribe, templates, election silence periods and the campaign preview (politician, manager).',
  },
  {
    name: 'Places',
    description:
      "A workspace's constituencies, wards and booths with their aliases and codes, so that a place written in any script or case is one place everywhere (everyone reads; politicians and managers keep them).",
  },
  {
    name: 'Conversations',
    description:
      'Replies reach a person: a thread per contact and channel, assigned by coverage, answered in context (a volunteer sees only theirs); quick replies. See docs/conversations.md.',
  },
  {
    name: 'Channel accounts',
    description: `The workspace's own provider accounts (${adapters.map((a) => a.label).join(', ')}): credentials encrypted and never returned, one default per channel, callback URLs per account, a test send (politician only). GET /api/channel-accounts/providers describes each provider. See docs/providers.md.`,
  },
  {
    name: 'Audit log',
    description:
      'Who did what in the workspace: team changes, exports, sends, opt-outs (politician only; read-only).',
  },
  {
    name: 'Webhooks',
    description:
      'Endpoints that receive events, signed per Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature; body { type, timestamp, data }). Events: message.delivered, message.failed, message.received, grievance.created, grievance.resolved, payment.processed, channel_account.failed, conversation.created, conversation.assigned; ping from the test route. Politician only.',
  },
  {
    name: 'Provider callbacks',
    description:
      "Delivery reports and replies from messaging providers: channel accounts' callback URLs (each with the account's secret token, and the provider's signature where it signs), and the deployment provider's callbacks (where a channel's deployment provider has any).",
  },
];

const LOGO = Buffer.from(
  '<svg xmlns="http://www.w3.org/2000/svg" width="320" height="40" viewBox="0 0 320 40">' +
    '<text x="0" y="28" font-family="sans-serif" font-size="22" font-weight="bold" fill="#ffffff">' +
    'Campaign Engagement Service</text></svg>',
);

/**
 * Last touches on the generated document: a query parameter with a default is optional (TypeBox marks it
 * required because the server fills it in), a tag no operation uses is left out, and what it repeats goes
 * to `components` (componentize).
 */
/** Objects with `fields.<key>` filters, closed again as the service reads them (see PATTERNS). */
function closePatterned(node: unknown): void {
  if (!node || typeof node !== 'object') return;
  const schema = node as Record<string, unknown>;
  if (schema[PATTERNS]) {
    schema.patternProperties = schema[PATTERNS];
    schema.additionalProperties = false;
    delete schema[PATTERNS];
  }
  for (const value of Object.values(schema)) closePatterned(value);
}

function finishDocument(document: OpenApiDocument): OpenApiDocument {
  const used = new Set<string>();
  for (const operations of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(operations)) {
      if (typeof operation !== 'object' || operation === null) continue;
      for (const tag of (operation.tags ?? []) as string[]) used.add(tag);
      for (const parameter of (operation.parameters ?? []) as Array<Record<string, unknown>>) {
        const schema = parameter.schema as { default?: unknown } | undefined;
        if (parameter.in === 'query' && schema?.default !== undefined) parameter.required = false;
      }
    }
  }
  document.tags = (document.tags ?? []).filter((tag) => used.has(tag.name));
  dropUnreachable405(document.paths ?? {});
  closePatterned(document);
  // The events this service sends: they carry webhook-signature, not a bearer token, and have ids like operations.
  for (const [event, operations] of Object.entries(document.webhooks ?? {})) {
    for (const [method, operation] of Object.entries(operations)) {
      operation.security ??= [];
      operation.operationId ??= operationId(method, `/webhook/${event}`);
    }
  }
  return componentize(document);
}

/**
 * The 405 of a path ending in a parameter, kept only where it can be answered: with the parameter left empty
 * or `.` (`/api/campaigns/`) the path is its collection's, and with `..` the collection's parent: 405 where
 * that path takes other methods but not this one (where it takes this one it answers as itself; where there is
 * none, 404); and a fixed path beside it (`/api/messages/send`) is 405 to the methods it does not take.
 */
function dropUnreachable405(paths: NonNullable<OpenApiDocument['paths']>): void {
  for (const [path, operations] of Object.entries(paths)) {
    if (!/\/\{[^}]+\}$/.test(path)) continue;
    const prefix = path.replace(/\/\{[^}]+\}$/, '');
    // `.` as the parameter is the collection's path too, and `..` its parent's.
    const above = [prefix, prefix.replace(/\/[^/]+$/, '')]
      .map((p) => paths[p] as Record<string, unknown> | undefined)
      .filter((item) => item !== undefined);
    const fixed = Object.entries(paths)
      .filter(([other]) => other.startsWith(`${prefix}/`) && /^[^/{]+$/.test(other.slice(prefix.length + 1)))
      .map(([, item]) => item as Record<string, unknown>);
    for (const [method, operation] of Object.entries(operations as Record<string, unknown>)) {
      const responses = (operation as { responses?: Record<string, unknown> } | null)?.responses;
      const reachable = [...above, ...fixed].some((item) => !item[method]);
      if (responses && !reachable) delete responses['405'];
    }
  }
}

/** The error envelope, once per status, each with what that status means here (then shared by `$ref`). */
const errorEnvelopes = Object.fromEntries(
  Object.entries(errorResponses).map(([status, { description }]) => [
    status,
    // Always JSON, also on an operation whose success is a file (the export).
    { description, content: { 'application/json': { schema: ErrorEnvelope } } },
  ]),
) as unknown as Record<ErrorStatus, Record<string, unknown>>;

/**
 * Statuses beyond those every route of its kind gives (400/413 with a body, 401/403 by permission, 404 with a
 * path parameter, 422, 429, 500, 503), by `METHOD url`. Kept here so the document names every status a client
 * must handle without each module repeating the error envelope.
 */
const extraStatuses: Record<string, ErrorStatus[]> = {
  'POST /api/auth/register': [403, 409],
  'POST /api/auth/login': [401],
  'POST /api/auth/verify-otp': [401],
  'POST /api/auth/reset-password': [401],
  'POST /api/users': [409],
  'PATCH /api/users/:id': [409],
  'DELETE /api/users/:id': [409],
  'POST /api/voters/import': [413],
  'GET /api/voters/imports/:import_id/errors.csv': [409],
  'POST /api/opt-outs/import': [413],
  'POST /api/campaigns/:id/preview': [409],
  'POST /api/voters': [409],
  'PUT /api/voters/:id': [409],
  'POST /api/messages/send': [402, 409, 502],
  'POST /api/messages/broadcast': [402, 404, 409],
  'POST /api/campaigns': [404],
  'PATCH /api/campaigns/:id': [409],
  'DELETE /api/campaigns/:id': [409],
  'POST /api/campaigns/:id/send': [402, 409],
  'POST /api/campaigns/:id/cancel': [409],
  'POST /api/campaigns/:id/retry-failed': [402, 409],
  'POST /api/payments': [409],
  'POST /api/webhooks/:id/deliveries/:delivery_id/retry': [409],
  'POST /api/webhooks/:id/test': [409],
  'POST /api/providers/:provider/:kind': [403, 404, 405],
  'GET /api/providers/:provider/:kind': [403, 404, 405],
  // 403: an IVR survey step without the call's own id.
  'GET /api/providers/:provider/:account/:token/:kind': [401, 403, 404, 405],
  'POST /api/conversations/:id/reply': [402, 409, 502],
  'POST /api/channel-accounts/:id/test': [402, 409],
  'POST /api/conversations/:id/grievance': [409],
  // A volunteer: filters on support_level or a sensitive field; assigning a conversation.
  'GET /api/voters': [403],
  'PATCH /api/conversations/:id': [403],
  // A volunteer lists only their own visits: another member's user_id.
  'GET /api/visits': [403],
  // No 403: a wrong signature on an account's URL is 401 (the account's own credentials), and the IVR steps
  // that need the call's id are GETs.
  'POST /api/providers/:provider/:account/:token/:kind': [401, 400, 405, 413],
  'POST /api/survey-runs/:id/cancel': [409],
  // A place name or alias taken; a custom field's key taken; a survey's keyword taken by an active survey, a
  // survey that has runs, a closed survey run again.
  'POST /api/places': [409],
  'PATCH /api/places/:id': [409],
  'POST /api/voter-fields': [409],
  'POST /api/surveys': [409],
  'PATCH /api/surveys/:id': [409],
  'DELETE /api/surveys/:id': [409],
  'POST /api/surveys/:id/runs': [402, 409],
  // A closed request opened again; erasing a request that is not an erasure (or a rejected one); exporting an
  // erased person. The public form: a wrong or expired code.
  'PATCH /api/privacy/requests/:id': [409],
  'POST /api/privacy/requests/:id/erase': [409],
  'GET /api/privacy/requests/:id/export': [409],
  'POST /privacy/:publicId/requests': [401],
};

/**
 * Statuses of its kind an operation never answers: the index needs no database; the health checks answer 503 for
 * any failure; a sign-in code is sent in the background (its answer never says whether it went, so never 500).
 */
const neverAnswered: Record<string, ErrorStatus[]> = {
  'GET /api': [500, 503],
  'GET /api/healthz': [500],
  'GET /api/readyz': [500],
  'POST /api/auth/send-otp': [500],
};

const successDescriptions: Record<string, string> = {
  '200': 'OK.',
  '201': 'Created.',
  '202': 'Accepted: queued; follow its progress with the returned id.',
};

/** The statuses an operation answers: its own (success) ones and the error envelope for each error status. */
function annotateResponses(
  method: string,
  url: string,
  permission: Permission | undefined,
  schema: Record<string, unknown>,
): void {
  const response = (schema.response ??= {}) as Record<string, Record<string, unknown>>;
  for (const [status, body] of Object.entries(response)) {
    if (successDescriptions[status] && body.description === undefined) {
      response[status] = { ...body, description: successDescriptions[status] };
    }
  }
  const statuses = new Set<ErrorStatus>([422, 429, 500, 503]);
  if (['POST', 'PUT', 'PATCH'].includes(method) && schema.body)
    [400, 413].forEach((c) => statuses.add(c as ErrorStatus));
  if (permission && permission !== 'public') statuses.add(401);
  // 403 where a role lacks the permission; where every role holds it, only the operation's own rules say 403.
  if (
    permission &&
    permission !== 'public' &&
    !Object.values(rolePermissions).every((held) => held.has(permission))
  )
    statuses.add(403);
  // A path parameter may be unknown (404), absurdly long (400) or, the last one, left empty (405 or 404; an
  // empty one before it is 422). finishDocument keeps the 405 only where the collection answers it.
  if (url.includes('/:')) [400, 404].forEach((c) => statuses.add(c as ErrorStatus));
  if (/\/:[^/]+$/.test(url)) statuses.add(405);
  for (const status of extraStatuses[`${method} ${url}`] ?? []) statuses.add(status);
  for (const status of neverAnswered[`${method} ${url}`] ?? []) statuses.delete(status);
  for (const status of [...statuses].sort()) response[status] ??= errorEnvelopes[status];
}

/**
 * The OpenAPI 3.1 document, generated from the TypeBox schemas the routes validate and serialize with, at
 * /api/openapi.json, and a browsable reference at /api/docs. Every route also gets the error envelope for each
 * error status it can answer, an operationId, its permission as `x-permission` (and once in its description),
 * and the bearer security requirement unless public (`security: []`). Every route is also recorded for
 * registeredRoutes().
 */
export async function installOpenApi(
  app: FastifyInstance,
  /** The events this service sends (OpenAPI `webhooks`), documented by the webhooks module. */
  webhooks: Record<string, unknown>,
): Promise<void> {
  const table: RouteOptions[] = [];
  routeTables.set(app, table);
  app.addHook('onRoute', (route) => {
    table.push(route);
    // A HEAD route shares its GET's schema object: annotate it once.
    if (!route.schema || route.schema.hide || route.method === 'HEAD') return;
    const schema = route.schema as Record<string, unknown>;
    const method = String([route.method].flat()[0] ?? '').toUpperCase();
    const permission = route.config?.permission;
    annotateResponses(method, route.url, permission, schema);
    if (method && !schema.operationId) schema.operationId = operationId(method, route.url);
    if (permission) schema['x-permission'] = permission;
    if (permission === 'public') schema.security ??= [];
    if (permission && permission !== 'public') {
      schema.security ??= [{ bearerAuth: [] }];
      const needs =
        permission === 'authenticated'
          ? 'Any signed-in user.'
          : `Requires permission \`${permission}\` (${rolesWith(permission)}).`;
      const text = typeof schema.description === 'string' ? schema.description : '';
      if (!text.includes(needs)) schema.description = text ? `${text}\n\n${needs}` : needs;
    }
  });

  await app.register(swagger, {
    transformObject: (documents) =>
      finishDocument((documents as { openapiObject: OpenApiDocument }).openapiObject),
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Campaign Engagement Service API',
        version: '1.0.0',
        description,
        license: {
          name: 'GNU Affero General Public License v3.0 or later',
          identifier: 'AGPL-3.0-or-later',
        },
      },
      servers: [{ url: '/', description: 'This server' }],
      components: {
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            description: 'A token of the shape `<id>|<secret>`.',
          },
        },
      },
      // The TypeBox schemas inside are JSON Schema, which the OpenAPI types do not model exactly.
      webhooks: webhooks as never,
      tags: tagOrder,
    },
  });

  app.get('/api/openapi.json', { config: { permission: 'public' }, schema: { hide: true } }, async () =>
    app.swagger(),
  );

  // The reference UI's own routes (page, assets) are public documentation.
  await app.register(async (docs) => {
    docs.addHook('onRoute', (route) => {
      route.config = { ...route.config, permission: 'public' };
    });
    await docs.register(swaggerUi, {
      routePrefix: '/api/docs',
      uiConfig: { docExpansion: 'list', deepLinking: true, validatorUrl: null },
      logo: { type: 'image/svg+xml', content: LOGO },
      theme: { title: 'Campaign Engagement Service API' },
      staticCSP: DOCS_CSP,
      transformSpecification: (spec) => spec,
    });
  });
}
