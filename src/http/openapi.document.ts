/**
 * The generated OpenAPI document's last touches, made once when it is first asked for: named schemas and
 * responses in `components` (each used by `$ref`), real enums, and every response header the API sends.
 */

export type ErrorStatus = 400 | 401 | 402 | 403 | 404 | 405 | 409 | 413 | 422 | 429 | 500 | 502 | 503;

type Json = Record<string, unknown>;
type Operations = Record<string, Json>;

export interface OpenApiDocument {
  tags?: Array<{ name: string }>;
  webhooks?: Record<string, Operations>;
  paths?: Record<string, Operations>;
  components?: Record<string, Json | undefined>;
}

/** Each error status: its name in `components.responses`, and what it means here. */
export const errorResponses: Record<ErrorStatus, { name: string; description: string }> = {
  400: {
    name: 'BadRequest',
    description:
      '`bad_request`: malformed JSON, a wrong content type, or a path segment over 2,048 characters.',
  },
  401: { name: 'Unauthorized', description: '`unauthorized`: no token, or one that is not valid.' },
  402: {
    name: 'InsufficientCredits',
    description:
      '`insufficient_credits`: not enough credits; `details` has channel, required and available. Nothing was sent.',
  },
  403: {
    name: 'Forbidden',
    description:
      "`forbidden`: the token's role lacks the permission this operation needs (register: sign-up is closed; provider callbacks: a bad signature).",
  },
  404: {
    name: 'NotFound',
    description: "`not_found`: no such row in your workspace (another workspace's rows answer the same).",
  },
  405: {
    name: 'MethodNotAllowed',
    description:
      '`method_not_allowed`: the path without its id (`/api/campaigns/`) names operations of other methods.',
  },
  409: {
    name: 'Conflict',
    description:
      '`conflict`: the resource is not in a state that allows this (see the operation), or a duplicate.',
  },
  413: { name: 'PayloadTooLarge', description: '`payload_too_large`: the body is over the size limit.' },
  422: {
    name: 'ValidationError',
    description:
      '`validation_error`: `details` maps each invalid field, body or query, to its messages; an unknown field or query parameter is one.',
  },
  429: { name: 'RateLimited', description: '`rate_limit_exceeded`: over the rate limit; see Retry-After.' },
  500: {
    name: 'ServerError',
    description: '`server_error`: an unexpected failure; the message carries the request id.',
  },
  502: {
    name: 'ProviderError',
    description: '`provider_error`: the messaging provider refused the message or could not be reached.',
  },
  503: {
    name: 'ServiceUnavailable',
    description:
      '`service_unavailable`: the database (or Redis, where set) does not answer, or the service is shutting down; try again.',
  },
};

const integer = { type: 'integer' };
const text = { type: 'string' };

/** Every response header the API sends, declared once in `components.headers`. */
const headers: Record<string, { description: string; schema: Json }> = {
  'X-Request-Id': {
    description: "This request's id, as the logs know it (the caller's own X-Request-Id when it sent one).",
    schema: text,
  },
  'X-RateLimit-Limit': { description: "Requests allowed in the route's rate-limit window.", schema: integer },
  'X-RateLimit-Remaining': { description: 'Requests left in the window.', schema: integer },
  'X-RateLimit-Reset': { description: 'Seconds until the window resets.', schema: integer },
  'Retry-After': { description: 'Seconds to wait before trying again.', schema: integer },
  'WWW-Authenticate': { description: '`Bearer`: the scheme this API takes (RFC 6750).', schema: text },
  Deprecation: {
    description:
      'On every answer of an API version the deployment marks deprecated (RFC 9745): when it was, as `@<unix seconds>`.',
    schema: text,
  },
  Sunset: {
    description: 'With Deprecation, when the version stops answering, if decided (RFC 8594).',
    schema: text,
  },
  Link: { description: 'With Deprecation, the migration guide (`rel="deprecation"`).', schema: text },
  'Idempotent-Replayed': {
    description: '`true` when this is the first answer to the same Idempotency-Key, given again.',
    schema: { type: 'string', enum: ['true'] },
  },
  Location: { description: 'The URL of what was created or queued.', schema: text },
  'Preference-Applied': { description: '`respond-async`: the Prefer header was honoured.', schema: text },
  'Content-Disposition': { description: 'The file name to save the download as.', schema: text },
};

const ref = (kind: string, name: string) => ({ $ref: `#/components/${kind}/${name}` });
const headerRefs = (names: string[]) => Object.fromEntries(names.map((name) => [name, ref('headers', name)]));

/** Headers on every answer: its id and the rate-limit count (every route is counted). */
const EVERY_ANSWER = ['X-Request-Id', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'];
const VERSIONING = ['Deprecation', 'Sunset', 'Link'];
const ERROR_HEADERS: Partial<Record<ErrorStatus, string[]>> = {
  401: ['WWW-Authenticate'],
  429: ['Retry-After'],
  503: ['Retry-After'],
};
/** Headers particular to an operation's success, by `METHOD path` as the document writes the path. */
const SUCCESS_HEADERS: Record<string, string[]> = {
  'POST /api/voters/import': ['Location', 'Preference-Applied'],
  'GET /api/voters/export': ['Content-Disposition'],
  'GET /api/voters/imports/{import_id}/errors.csv': ['Content-Disposition'],
  'GET /api/opt-outs/export': ['Content-Disposition'],
};

/** Keys whose values are data, not schemas: never read for names or enums. */
const DATA_KEYS = new Set(['example', 'examples', 'default', 'enum', 'const']);

/** `anyOf` of one-value enums (TypeBox's union of literals), optionally with null, as one `enum`. */
function collapseEnum(node: Json): Json {
  const members = node.anyOf;
  if (!Array.isArray(members) || members.length < 2) return withEnumType(node);
  const values: unknown[] = [];
  let nullable = false;
  for (const member of members as Json[]) {
    if (member.type === 'null' && Object.keys(member).length === 1) nullable = true;
    else if (Array.isArray(member.enum) && member.enum.length === 1) values.push(member.enum[0]);
    else if ('const' in member) values.push(member.const);
    else return node;
  }
  if (values.length === 0) return node;
  const { anyOf: _members, ...rest } = node;
  const single = withEnumType({ enum: values });
  return nullable ? { ...rest, anyOf: [single, { type: 'null' }] } : { ...rest, ...single };
}

/** An enum of strings says `type: string`, as generators expect; a `const` is written as the generator does. */
function withEnumType(node: Json): Json {
  if ('const' in node) {
    const { const: value, ...rest } = node;
    return withEnumType({ ...rest, enum: [value] });
  }
  if (node.type === undefined && Array.isArray(node.enum) && node.enum.every((v) => typeof v === 'string'))
    return { type: 'string', ...node };
  return node;
}

/**
 * Schemas with a `title` move to `components.schemas` under it and are used by `$ref`: the models a client
 * generator names. Two different schemas under one title are a mistake in the code, and refused.
 */
function nameSchemas(node: unknown, schemas: Json): unknown {
  if (Array.isArray(node)) return node.map((item) => nameSchemas(item, schemas));
  if (typeof node !== 'object' || node === null) return node;
  const out: Json = {};
  for (const [key, value] of Object.entries(node))
    out[key] = DATA_KEYS.has(key) ? value : nameSchemas(value, schemas);
  const schema = collapseEnum(out);
  const name = schema.title;
  if (typeof name !== 'string' || !/^[A-Z][A-Za-z0-9]*$/.test(name)) return schema;
  const known = schemas[name] as Json | undefined;
  if (known !== undefined) {
    // A use may say more about the model where it is used: a description beside the `$ref`.
    const { description, ...rest } = schema;
    const { description: knownDescription, ...knownRest } = known;
    if (JSON.stringify(knownRest) !== JSON.stringify(rest)) {
      throw new Error(`Two different schemas are titled ${name}; give one another title.`);
    }
    return description === knownDescription ? ref('schemas', name) : { ...ref('schemas', name), description };
  }
  schemas[name] = schema;
  return ref('schemas', name);
}

/** An operation's answers: the shared error responses by `$ref`, and the headers each success carries. */
function shareResponses(key: string, operation: Json): void {
  const responses = operation.responses as Record<string, Json> | undefined;
  if (!responses) return;
  const parameters = (operation.parameters ?? []) as Array<{ in?: string; name?: string }>;
  const idempotent = parameters.some((p) => p.in === 'header' && p.name === 'idempotency-key');
  for (const [status, response] of Object.entries(responses)) {
    const shared = errorResponses[Number(status) as ErrorStatus];
    if (shared && response.description === shared.description) {
      responses[status] = ref('responses', shared.name);
      continue;
    }
    if ('$ref' in response) continue;
    const names = [...EVERY_ANSWER];
    if (/^2/.test(status)) {
      names.push(...VERSIONING, ...(SUCCESS_HEADERS[key] ?? []));
      if (idempotent) names.push('Idempotent-Replayed');
    } else names.push(...(ERROR_HEADERS[Number(status) as ErrorStatus] ?? []));
    response.headers = { ...headerRefs(names), ...(response.headers as Json | undefined) };
  }
}

const SUCCESS_NAMES: Record<string, string> = { '200': '', '201': 'Created', '202': 'Accepted' };

/**
 * A success whose body is a named envelope and whose headers are the usual ones is the same answer wherever
 * it appears: it goes to `components.responses` (`Voter`, `VoterCreated`) and is used by `$ref`.
 */
function shareSuccesses(operation: Json, responses: Json): void {
  const answers = operation.responses as Record<string, Json> | undefined;
  for (const [status, response] of Object.entries(answers ?? {})) {
    const content = response.content as Record<string, { schema?: Json }> | undefined;
    const body =
      content && Object.keys(content).length === 1 ? content['application/json']?.schema : undefined;
    const model = /^#\/components\/schemas\/(\w+?)(?:Response)?$/.exec(String(body?.$ref ?? ''))?.[1];
    const suffix = SUCCESS_NAMES[status];
    if (!model || suffix === undefined || Object.keys(body!).length !== 1) continue;
    const name = `${model}${suffix}`;
    const known = responses[name];
    if (known === undefined) responses[name] = response;
    else if (JSON.stringify(known) !== JSON.stringify(response)) continue;
    answers![status] = ref('responses', name);
  }
}

/** A parameter written the same way by three operations or more is one in `components.parameters` (`PerPage`). */
function shareParameters(document: OpenApiDocument): Json {
  const uses = new Map<string, Json[]>();
  forEachOperation(document, (_key, operation) => {
    for (const parameter of (operation.parameters ?? []) as Json[]) {
      const text = JSON.stringify(parameter);
      uses.set(text, [...(uses.get(text) ?? []), operation]);
    }
  });
  const parameters: Json = {};
  for (const [text, operations] of [...uses].sort(([, a], [, b]) => b.length - a.length)) {
    const parameter = JSON.parse(text) as Json;
    const name = String(parameter.name).replace(/(^|[^A-Za-z0-9])([a-z])/g, (_m, _s, c: string) =>
      c.toUpperCase(),
    );
    if (operations.length < 3 || parameters[name] !== undefined || !/^[A-Za-z0-9]+$/.test(name)) continue;
    parameters[name] = parameter;
    for (const operation of new Set(operations)) {
      operation.parameters = (operation.parameters as Json[]).map((p) =>
        JSON.stringify(p) === text ? ref('parameters', name) : p,
      );
    }
  }
  return parameters;
}

function forEachOperation(document: OpenApiDocument, visit: (key: string, operation: Json) => void): void {
  for (const [path, operations] of Object.entries(document.paths ?? {})) {
    for (const [method, operation] of Object.entries(operations)) {
      if (typeof operation === 'object' && operation !== null)
        visit(`${method.toUpperCase()} ${path}`, operation);
    }
  }
}

/**
 * The generator copies a response's description ("OK.") into its body's schema as well: said once, on the
 * response, a model used by several operations is one schema.
 */
function dropEchoedDescriptions(operation: Json): void {
  for (const response of Object.values((operation.responses ?? {}) as Record<string, Json>)) {
    for (const media of Object.values((response.content ?? {}) as Record<string, { schema?: Json }>)) {
      if (media.schema?.description === response.description) delete media.schema?.description;
    }
  }
}

/** Moves what the document repeats into `components`, where generators and readers find it by name. */
export function componentize(document: OpenApiDocument): OpenApiDocument {
  const components = (document.components ??= {});
  const schemas: Json = { ...components.schemas };
  forEachOperation(document, (_key, operation) => dropEchoedDescriptions(operation));
  document.paths = nameSchemas(document.paths, schemas) as OpenApiDocument['paths'];
  document.webhooks = nameSchemas(document.webhooks, schemas) as OpenApiDocument['webhooks'];
  if (!schemas.Error) throw new Error('The error envelope must be titled Error.');
  forEachOperation(document, shareResponses);
  const responses: Json = {};
  forEachOperation(document, (_key, operation) => shareSuccesses(operation, responses));
  components.parameters = shareParameters(document);
  components.schemas = Object.fromEntries(Object.entries(schemas).sort(([a], [b]) => a.localeCompare(b)));
  for (const [status, { name, description }] of Object.entries(errorResponses)) {
    responses[name] = {
      description,
      headers: headerRefs([...EVERY_ANSWER, ...(ERROR_HEADERS[Number(status) as ErrorStatus] ?? [])]),
      content: { 'application/json': { schema: ref('schemas', 'Error') } },
    };
  }
  components.responses = Object.fromEntries(Object.entries(responses).sort(([a], [b]) => a.localeCompare(b)));
  components.headers = headers;
  return document;
}
