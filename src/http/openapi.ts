import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance, RouteOptions } from 'fastify';
import type { Bucket } from './rate-limit.ts';
import type { Permission } from './permissions.ts';
import { webhookEventsOpenApi } from '../modules/webhooks/webhooks.openapi.ts';
import { ErrorEnvelope } from './schemas.ts';
import { DOCS_CSP } from './security-headers.ts';

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

/** `post /api/webhooks/:id/deliveries/:delivery_id/retry` -> `postWebhooksIdDeliveriesDeliveryIdRetry`. */
function operationId(method: string, url: string): string {
  const words = url
    .replace(/^\/api\//, '')
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1));
  return method.toLowerCase() + words.join('');
}

/**
 * The OpenAPI 3.1 document, generated from the TypeBox schemas the routes validate and serialize with, at
 * /api/openapi.json, and a browsable reference at /api/docs. Every route also gets the error envelope as its
 * 4xx/5xx response, an operationId, its permission as `x-permission`, and the bearer security requirement
 * unless public (`security: []`). Every route is also recorded for registeredRoutes().
 */
export async function installOpenApi(app: FastifyInstance): Promise<void> {
  const table: RouteOptions[] = [];
  routeTables.set(app, table);
  app.addHook('onRoute', (route) => {
    table.push(route);
    // A HEAD route shares its GET's schema object: annotate it once.
    if (!route.schema || route.schema.hide || route.method === 'HEAD') return;
    const schema = route.schema as Record<string, unknown>;
    const response = (schema.response ??= {}) as Record<string, unknown>;
    response['4xx'] ??= ErrorEnvelope;
    response['5xx'] ??= ErrorEnvelope;
    const method = [route.method].flat()[0];
    if (method && !schema.operationId) schema.operationId = operationId(String(method), route.url);
    if (route.config?.permission) schema['x-permission'] = route.config.permission;
    if (route.config?.permission === 'public') schema.security ??= [];
    if (route.config?.permission && route.config.permission !== 'public') {
      schema.security ??= [{ bearerAuth: [] }];
      const needs = `Requires permission \`${route.config.permission}\`.`;
      schema.description = schema.description ? `${String(schema.description)}\n\n${needs}` : needs;
    }
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'Campaign Engagement Service API', version: '1.0.0', description },
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
      webhooks: webhookEventsOpenApi as never,
      tags: [
        { name: 'Health' },
        { name: 'Authentication' },
        { name: 'Users' },
        {
          name: 'Grievances',
          description: "Constituents' grievances: lifecycle, priority and due dates, assignment.",
        },
        { name: 'Payments', description: 'Buying message credits (politician only).' },
        {
          name: 'Webhooks',
          description:
            'Endpoints that receive events, signed per Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature; body { type, timestamp, data }). Events: message.delivered, message.failed, message.received, grievance.created, grievance.resolved, payment.processed; ping from the test route. Politician only.',
        },
        { name: 'Messaging', description: 'Send, broadcast and history; credits; Idempotency-Key.' },
        { name: 'Campaigns', description: 'Campaigns, scheduled or sent at once, with live stats.' },
        {
          name: 'Consent',
          description:
            'Opt-outs, replies and STOP keywords, templates and election silence periods (politician, manager).',
        },
        { name: 'Provider callbacks', description: 'Signed delivery reports from messaging providers.' },
      ],
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
      staticCSP: DOCS_CSP,
      transformSpecification: (spec) => spec,
    });
  });
}
