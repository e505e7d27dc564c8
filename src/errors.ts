/** The closed set of error codes the API answers with, and the HTTP status of each. */
export const errorStatus = {
  bad_request: 400,
  unauthorized: 401,
  insufficient_credits: 402,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  payload_too_large: 413,
  validation_error: 422,
  /** A channel account's test send that the provider refused (details: its code and text). */
  provider_rejected: 422,
  rate_limit_exceeded: 429,
  server_error: 500,
  provider_error: 502,
  service_unavailable: 503,
} as const;

export type ErrorCode = keyof typeof errorStatus;

/** Field path -> messages, e.g. { "phone": ["must be ..."], "recipients.3": ["..."] }. */
export type FieldErrors = Record<string, string[]>;

export class AppError extends Error {
  readonly statusCode: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = 'AppError';
    this.statusCode = errorStatus[code];
  }
}

/** The most fields a validation error lists in `details`; its message counts the rest. */
export const MAX_FIELD_ERRORS = 50;

/** A field path as shown to the caller: a hostile field name can be as long as the body. */
export function shownPath(path: string): string {
  return path.length > 100 ? `${path.slice(0, 100)}…` : path;
}

/**
 * A validation error's message and `details`, bounded whatever the request held: the first MAX_FIELD_ERRORS
 * fields (paths cut to 100 characters, at most 10 messages each), and a message that counts the others.
 */
function boundedFieldErrors(message: string, fields: Record<string, unknown>) {
  const shown = Object.create(null) as FieldErrors;
  let listed = 0;
  let more = 0;
  for (const path of Object.keys(fields)) {
    if (listed >= MAX_FIELD_ERRORS) {
      more += 1;
      continue;
    }
    const key = shownPath(path);
    const list = (shown[key] ??= []);
    if (list.length === 0) listed += 1;
    const value = fields[path];
    const texts = Array.isArray(value) ? value.map(String) : [String(value)];
    for (const text of texts.slice(0, 10)) if (!list.includes(text)) list.push(text);
  }
  if (more === 0) return { message, details: shown };
  return {
    message: `The request has ${listed + more} invalid fields; details lists the first ${listed}: ${Object.keys(shown).join(', ')}.`,
    details: shown,
  };
}

/** The error envelope's body: what every error answer carries. */
export function errorBody(code: ErrorCode, message: string, details?: Record<string, unknown>) {
  if (code === 'validation_error' && details) ({ message, details } = boundedFieldErrors(message, details));
  return { success: false as const, error_code: code, message, ...(details ? { details } : {}) };
}

export function validationError(fields: FieldErrors, message?: string): AppError {
  // The message names the fields, as the schema's own 422s do, so that a caller reading only it knows what to fix.
  const names = Object.keys(fields).slice(0, 10).map(shownPath);
  return new AppError(
    'validation_error',
    message ??
      `The request has invalid fields: ${names.join(', ')}${Object.keys(fields).length > 10 ? ', ...' : ''}.`,
    fields,
  );
}

export function notFound(what: string): AppError {
  return new AppError('not_found', `${what} not found.`);
}
