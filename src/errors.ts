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

/** The error envelope's body: what every error answer carries. */
export function errorBody(code: ErrorCode, message: string, details?: Record<string, unknown>) {
  return { success: false as const, error_code: code, message, ...(details ? { details } : {}) };
}

export function validationError(fields: FieldErrors, message = 'The request has invalid fields.'): AppError {
  return new AppError('validation_error', message, fields);
}

export function notFound(what: string): AppError {
  return new AppError('not_found', `${what} not found.`);
}
