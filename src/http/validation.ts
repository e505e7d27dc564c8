import { Ajv, type ErrorObject, type Options } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifyRequest, FastifySchemaCompiler, RouteOptions } from 'fastify';
import { Type } from 'typebox';
import { type FieldErrors, validationError } from '../errors.ts';
import { toE164 } from '../lib/phone.ts';

// ajv-formats is CommonJS; under NodeNext its default import is the module object.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

// `allErrors: false`: ajv stops at the first problem, so a hostile body (200,000 bad array items, 80,000
// unknown fields) costs one error, not one per item. A failing body that is small is checked again in full
// (below) so the caller learns every problem at once.
// `verbose`: an error carries the schema that failed, so a RefInput's `x-id` can name the id it wanted.
const shared: Options = {
  allErrors: false,
  useDefaults: true,
  removeAdditional: false,
  strict: false,
  verbose: true,
};

/** The message of a phone that does not read as a possible number (as the voters' rules word it). */
export const PHONE_MESSAGE =
  'must be a valid phone number, e.g. +919812345678 (a number without + is read in DEFAULT_COUNTRY).';

/**
 * `x-phone: true` on a string schema: the value must read as a possible phone number (in DEFAULT_COUNTRY
 * when it has no +). Checked with the schema, so a bad phone is reported with every other bad field at once.
 * An empty string is left to minLength.
 */
function addPhoneKeyword(ajv: Ajv, defaultCountry: string | undefined): Ajv {
  ajv.addKeyword({
    keyword: 'x-phone',
    type: 'string',
    schemaType: 'boolean',
    errors: true,
    validate: (wanted: boolean, data: string) =>
      !wanted ||
      defaultCountry === undefined ||
      data.trim() === '' ||
      toE164(data, defaultCountry) !== undefined,
  });
  // `x-not-blank: true`: a string of spaces is as empty as "" (the value is trimmed when stored).
  ajv.addKeyword({
    keyword: 'x-not-blank',
    type: 'string',
    schemaType: 'boolean',
    errors: true,
    validate: (wanted: boolean, data: string) => !wanted || data.trim() !== '',
  });
  return ajv;
}

/**
 * Bodies are checked as sent: a number is not a string, an unknown field is an error. Query strings and
 * path parameters arrive as text, so they are coerced to the declared types. `allErrors` variants report
 * every problem of a small failing value (below).
 */
function makeAjvs(defaultCountry: string | undefined) {
  const make = (options: Options) =>
    addPhoneKeyword(addFormats(new Ajv({ ...shared, ...options })), defaultCountry);
  return {
    body: make({ coerceTypes: false }),
    text: make({ coerceTypes: 'array' }),
    bodyAll: make({ allErrors: true, coerceTypes: false }),
    textAll: make({ allErrors: true, coerceTypes: 'array' }),
  };
}

/** A failing value with at most this many values (keys, items, leaves) is checked again for every problem. */
export const FULL_CHECK_MAX_VALUES = 2_000;

/** True when `value` holds at most `limit` values in all; stops counting as soon as it is over. */
export function fewValues(value: unknown, limit: number): boolean {
  const stack: unknown[] = [value];
  let count = 0;
  while (stack.length > 0) {
    const item = stack.pop();
    count += 1;
    if (count > limit) return false;
    if (Array.isArray(item)) {
      if (count + stack.length + item.length > limit) return false;
      for (const child of item) stack.push(child);
    } else if (item !== null && typeof item === 'object') {
      // Key by key, so an object of 80,000 fields is given up on after `limit` of them.
      for (const key in item) {
        if (count + stack.length >= limit) return false;
        stack.push((item as Record<string, unknown>)[key]);
      }
    }
  }
  return true;
}

/** Error lists of a failing value too large to check in full: they hold its first problem only. */
export const firstProblemOnly = new WeakSet<object>();

type Check = ((data: unknown, context?: object) => boolean) & {
  errors?: ErrorObject[] | null;
  schemaEnv?: unknown;
};

/**
 * Runs a compiled check, or answers 'threw': Ajv's comparison of items (`uniqueItems`, through fast-deep-equal)
 * calls an object's own `valueOf` or `toString` when the request gave it one, and throws when that is not a
 * function. Such a value is refused like any other (422), never a 500.
 */
function safely(check: Check, data: unknown, context?: object): boolean | 'threw' {
  try {
    return check(data, context);
  } catch {
    return 'threw';
  }
}

/** The error of a value whose check threw (see safely). */
const uncheckable: ErrorObject = {
  instancePath: '',
  schemaPath: '#',
  keyword: 'uncheckable',
  params: {},
  message:
    'holds an object with a key named like a built-in method (such as valueOf or toString) where plain values are expected',
};

function compilerOf(ajvs: ReturnType<typeof makeAjvs>): FastifySchemaCompiler<unknown> {
  return ({ schema, httpPart }) => {
    const ajv = httpPart === 'body' ? ajvs.body : ajvs.text;
    const first = ajv.compile(schema as object) as Check;
    let all: Check | undefined;
    const check: Check = (data, context) => {
      const valid = safely(first, data, context);
      if (valid === true) return true;
      check.errors = valid === false ? first.errors : [uncheckable];
      if (valid === false && fewValues(data, FULL_CHECK_MAX_VALUES)) {
        all ??= (httpPart === 'body' ? ajvs.bodyAll : ajvs.textAll).compile(schema as object) as Check;
        if (safely(all, data, context) === false && all.errors?.length) check.errors = all.errors;
      } else if (first.errors) {
        firstProblemOnly.add(first.errors);
      }
      return false;
    };
    // Fastify hands ajv functions (those with a schemaEnv) the parent too, so defaults reach the root.
    check.schemaEnv = first.schemaEnv;
    return check as ReturnType<FastifySchemaCompiler<unknown>>;
  };
}

/** Schemas checked outside a route (no phone rule: `x-phone` passes). */
export const validatorCompiler: FastifySchemaCompiler<unknown> = compilerOf(makeAjvs(undefined));

const compilers = new Map<string, FastifySchemaCompiler<unknown>>();

/** The app's validator compiler: as validatorCompiler, and `x-phone` strings read in `defaultCountry`. */
export function validatorCompilerFor(defaultCountry: string): FastifySchemaCompiler<unknown> {
  let compiler = compilers.get(defaultCountry);
  if (!compiler) {
    compiler = compilerOf(makeAjvs(defaultCountry));
    compilers.set(defaultCountry, compiler);
  }
  return compiler;
}

function fieldPath(error: ErrorObject, part: string | undefined): string {
  const segments = error.instancePath.split('/').filter(Boolean);
  if (error.keyword === 'required') segments.push(String(error.params.missingProperty));
  if (error.keyword === 'additionalProperties') segments.push(String(error.params.additionalProperty));
  if (segments.length === 0) return part === 'querystring' ? 'query' : (part ?? 'body');
  return segments.map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~')).join('.');
}

function describeType(type: unknown): string {
  const names: Record<string, string> = {
    string: 'a string',
    integer: 'a whole number',
    number: 'a number',
    boolean: 'true or false',
    array: 'an array',
    object: 'an object',
    null: 'null',
  };
  const list = String(type).split(',');
  return list.map((t) => names[t] ?? t).join(' or ');
}

const formatNames: Record<string, string> = {
  email: 'a valid email address',
  'date-time': 'an ISO 8601 date-time such as 2026-01-31T09:30:00Z',
  date: 'an ISO 8601 date such as 2026-01-31',
  uri: 'an absolute URL',
};

function message(error: ErrorObject): string | undefined {
  const p = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required':
      return 'is required.';
    case 'additionalProperties':
      return 'is not an allowed field.';
    case 'type':
      return `must be ${describeType(p.type)}.`;
    case 'minLength':
      return p.limit === 1 ? 'must not be empty.' : `must be at least ${String(p.limit)} characters.`;
    case 'maxLength':
      return `must be at most ${String(p.limit)} characters.`;
    case 'minimum':
      return `must be at least ${String(p.limit)}.`;
    case 'maximum':
      return `must be at most ${String(p.limit)}.`;
    case 'minItems':
      return `must have at least ${String(p.limit)} items.`;
    case 'maxItems':
      return `must have at most ${String(p.limit)} items.`;
    case 'format':
      return `must be ${formatNames[String(p.format)] ?? `in ${String(p.format)} format`}.`;
    case 'enum':
      return `must be one of: ${(p.allowedValues as unknown[]).join(', ')}.`;
    case 'const':
      return `must be ${JSON.stringify(p.allowedValue)}.`;
    case 'pattern': {
      // An id (RefInput) names its prefix in `x-id`: say what an id looks like.
      const prefix = (error.parentSchema as Record<string, unknown> | undefined)?.['x-id'];
      return typeof prefix === 'string' ? `must be an id such as ${prefix}_12.` : 'has an invalid format.';
    }
    case 'uniqueItems':
      return 'must not repeat items.';
    case 'minProperties':
      return p.limit === 1
        ? 'must name at least one field to change.'
        : `must name at least ${String(p.limit)} fields.`;
    case 'maxProperties':
      return `must name at most ${String(p.limit)} fields.`;
    case 'x-phone':
      return PHONE_MESSAGE;
    case 'x-not-blank':
      return 'must not be empty.';
    case 'anyOf':
      // Each branch has reported its own error; they are merged below.
      return undefined;
    default:
      // Never the validator's own wording (it speaks of schemas, not of what to send).
      return 'is invalid.';
  }
}

/**
 * Ajv's errors as `{ "field.path": ["message", ...] }`: per field, what to send, once. A union (`anyOf`, e.g.
 * a string or null) makes every branch report: when the value had the right type for one branch and failed
 * its rule (a format, a length, an item inside), the other branches' type errors ("must be null.") are noise
 * and dropped; when it had no branch's type, the types are merged ("must be a string or null.").
 */
export function fieldErrors(errors: readonly ErrorObject[], part: string | undefined): FieldErrors {
  // Field names come from the caller: `toString` or `__proto__` must be plain keys, not Object's own.
  const out: FieldErrors = Object.create(null) as FieldErrors;
  const typesByPath = new Map<string, string[]>();
  // Paths with a problem other than a wrong type, at the path itself or inside it.
  const ruled = new Set<string>();
  for (const error of errors) {
    if (error.keyword === 'anyOf') continue;
    const segments = fieldPath(error, part).split('.');
    // A wrong type inside a value (an item, a field) means the value itself had the right type.
    const own = error.keyword === 'type' ? segments.length - 1 : segments.length;
    for (let i = 1; i <= own; i += 1) ruled.add(segments.slice(0, i).join('.'));
  }
  // A union of constants (`"manager" | "volunteer"`) reports one `const` error per branch: merged below.
  const constsByPath = new Map<string, unknown[]>();
  for (const error of errors) {
    const path = fieldPath(error, part);
    if (error.keyword === 'type') {
      typesByPath.set(path, [...(typesByPath.get(path) ?? []), String(error.params.type)]);
      continue;
    }
    if (error.keyword === 'const') {
      constsByPath.set(path, [...(constsByPath.get(path) ?? []), error.params.allowedValue]);
      continue;
    }
    const text = message(error);
    if (!text) continue;
    const list = (out[path] ??= []);
    if (!list.includes(text)) list.push(text);
  }
  for (const [path, values] of constsByPath) {
    const text =
      values.length === 1
        ? `must be ${JSON.stringify(values[0])}.`
        : `must be one of: ${[...new Set(values)].map(String).join(', ')}.`;
    const list = (out[path] ??= []);
    if (!list.includes(text)) list.push(text);
  }
  for (const [path, types] of typesByPath) {
    if (ruled.has(path)) continue;
    (out[path] ??= []).unshift(`must be ${describeType([...new Set(types)].join(','))}.`);
  }
  return out;
}

/**
 * Field paths (as in validation errors) of the strings in `value` that hold a NUL character, at most 20.
 * PostgreSQL cannot store one in text, so the API refuses it on every route and either database alike.
 * Iterative, and it stops after 100,000 values: a hostile body may nest thousands of levels deep.
 */
export function nulFields(value: unknown, root: string): string[] {
  const found: string[] = [];
  const stack: Array<[unknown, string]> = [[value, root]];
  for (let seen = 0; stack.length > 0 && seen < 100_000 && found.length < 20; seen += 1) {
    const [item, path] = stack.pop()!;
    const at = (key: string | number) => (path ? `${path}.${key}` : String(key));
    if (typeof item === 'string') {
      if (item.includes('\u0000')) found.push(path);
    } else if (Array.isArray(item)) {
      item.forEach((child, i) => stack.push([child, at(i)]));
    } else if (item !== null && typeof item === 'object') {
      for (const [key, child] of Object.entries(item)) {
        if (key.includes('\u0000')) found.push(at(key));
        stack.push([child, at(key)]);
      }
    }
  }
  return found;
}

/** Throws a 422 naming every field of `parts` (value, field path) that holds a NUL character. */
export function refuseNul(...parts: Array<[unknown, string]>): void {
  const fields = parts.flatMap(([value, root]) => nulFields(value, root)).map((f) => f || 'body');
  if (fields.length === 0) return;
  throw validationError(
    Object.fromEntries(fields.map((f) => [f, ['must not contain the NUL character (U+0000).']])),
    `The request has invalid fields: ${fields.join(', ')}.`,
  );
}

/**
 * An onRoute hook: every route's query string is closed, so an unknown query parameter is a 422 naming it,
 * as an unknown body field is. A route without a query schema gets an empty one; a declared one that says
 * nothing about other parameters refuses them.
 */
export function closeQueryString(route: RouteOptions): void {
  const schema = (route.schema ??= {});
  const query = schema.querystring as Record<string, unknown> | undefined;
  if (query === undefined) schema.querystring = Type.Object({}, { additionalProperties: false });
  else if (query.type === 'object' && query.additionalProperties === undefined) {
    schema.querystring = { ...query, additionalProperties: false };
  }
}

/**
 * An onRoute hook: a signed-in route that declares no body (send, cancel, retry-failed, preview, logout...)
 * answers a JSON body with fields as a 422 naming each, as a route with a body schema does an unknown field;
 * an empty body or `{}` is fine. Public routes are left alone (the one-click unsubscribe takes any body).
 */
export function closeEmptyBody(route: RouteOptions): void {
  if (route.schema?.body !== undefined) return;
  if ((route.config as { permission?: string } | undefined)?.permission === 'public') return;
  const refuse = async (request: FastifyRequest): Promise<void> => {
    const body = request.body;
    // Only a JSON body is judged here; files (imports) and forms go to their own parsers.
    if (body === undefined || body === null || !/json/i.test(request.headers['content-type'] ?? '')) return;
    if (typeof body === 'object' && !Array.isArray(body)) {
      const fields = Object.keys(body);
      if (fields.length === 0) return;
      throw validationError(
        Object.fromEntries(
          fields.map((f) => [f, ['is not an allowed field: this operation takes no body.']]),
        ),
        `The request has invalid fields: ${fields.join(', ')}.`,
      );
    }
    throw validationError({ body: ['must be empty or {}: this operation takes no body.'] });
  };
  const existing = route.preValidation;
  route.preValidation =
    existing === undefined ? refuse : [...(Array.isArray(existing) ? existing : [existing]), refuse];
}
