import type { Socket } from 'node:net';
import type { RouteMethods } from './methods.ts';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isDatabaseUnavailable } from '../db/errors.ts';
import { AppError, type ErrorCode, errorBody, errorStatus, MAX_FIELD_ERRORS, shownPath } from '../errors.ts';
import { setSecurityHeaders } from './security-headers.ts';
import { fieldErrors, firstProblemOnly } from './validation.ts';

function send(reply: FastifyReply, code: ErrorCode, message: string, details?: Record<string, unknown>) {
  return reply
    .code(errorStatus[code])
    .type('application/json; charset=utf-8')
    .send(errorBody(code, message, details));
}

/**
 * What Node's HTTP parser refuses before the app sees a request (headers over its 16 KB limit, a malformed
 * request line, a request that took too long to arrive) is answered with the error envelope too, as 400
 * `bad_request` (the contract's codes have no 431 or 408), and the connection is closed.
 */
export function clientErrorHandler(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const message =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? 'The request headers are too large: keep them under 16 KB in all.'
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? 'The request took too long to arrive.'
        : 'The request is not valid HTTP.';
  const body = JSON.stringify(errorBody('bad_request', message));
  if (!socket.writable) return void socket.destroy();
  socket.end(
    `HTTP/1.1 ${errorStatus.bad_request} Bad Request\r\nContent-Type: application/json; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/**
 * Fastify's router refuses some paths before any route or hook runs: a percent-encoding that is not UTF-8
 * (`/api/voters/%ED%A0%80`) and a path segment over the router's 2,048 characters (Fastify's own answer is a 414
 * that echoes the path). Both get the envelope and X-Request-Id, as 400 `bad_request` (the contract's codes
 * have no 414); the path is not echoed.
 */
export function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  reply.header('x-request-id', request.id);
  setSecurityHeaders(request, reply);
  const message =
    error.code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? 'A path segment is longer than 2,048 characters: ids are short, e.g. /api/voters/42.'
      : error.code === 'FST_ERR_BAD_URL'
        ? 'The path is not valid: a percent-encoded part of it is not UTF-8.'
        : 'The request could not be routed.';
  void send(reply, 'bad_request', message);
}

/** Rewrites Fastify's own errors into our codes; anything unexpected becomes a 500 without its details. */
function classify(error: FastifyError): [ErrorCode, string] | undefined {
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return ['bad_request', 'Unsupported Content-Type: send the body as application/json.'];
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return ['payload_too_large', 'The request body is too large.'];
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return ['bad_request', 'The body is empty but Content-Type is application/json: send a JSON object.'];
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return ['bad_request', 'Content-Length does not match the body.'];
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return ['bad_request', 'The body is not valid JSON.'];
  }
  if (error instanceof SyntaxError || error.statusCode === 400) {
    return [
      'bad_request',
      `The request could not be read: ${error.message.replace(/\s+/g, ' ').slice(0, 200)}`,
    ];
  }
  if (error.statusCode === 413) return ['payload_too_large', 'The request body is too large.'];
  if (error.statusCode === 415) return ['bad_request', 'Unsupported Content-Type.'];
  return undefined;
}

const cutPath = (path: string) => (path.length > 200 ? `${path.slice(0, 200)}...` : path);

/** 405: the path exists, not with this method; `Allow` names the path's own methods (404: no such path). */
export function methodNotAllowed(request: FastifyRequest, reply: FastifyReply, allowed: string[]) {
  const path = cutPath(request.originalUrl.split('?')[0] ?? '/');
  const method = request.method.slice(0, 20);
  if (allowed.length === 0)
    return send(reply, 'not_found', `No endpoint ${method} ${path}. See /api/docs for the API reference.`);
  reply.header('allow', allowed.join(', '));
  return send(reply, 'method_not_allowed', `${method} is not allowed on ${path}; use ${allowed.join(', ')}.`);
}

export function installErrorHandling(app: FastifyInstance, methods: RouteMethods): void {
  app.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    if (error instanceof AppError) {
      if (error.headers) reply.headers(error.headers);
      // Every 401 names the scheme it wants (RFC 9110 section 11.6.1).
      if (error.code === 'unauthorized') reply.header('www-authenticate', 'Bearer');
      return send(reply, error.code, error.message, error.details);
    }
    if (error.validation) {
      const details = fieldErrors(error.validation as never, error.validationContext);
      const fields = Object.keys(details).slice(0, MAX_FIELD_ERRORS).map(shownPath).join(', ');
      const partial = firstProblemOnly.has(error.validation)
        ? ' The request is too large to check in full: only its first problem is reported.'
        : '';
      return send(reply, 'validation_error', `The request has invalid fields: ${fields}.${partial}`, details);
    }
    const known = classify(error);
    if (known) return send(reply, known[0], known[1]);
    if (isDatabaseUnavailable(error)) {
      request.log.error({ err: error }, 'database unavailable');
      request.server.databaseOutage?.report();
      reply.header('retry-after', '1');
      return send(
        reply,
        'service_unavailable',
        'The service is temporarily unavailable. Try again shortly.',
        {
          request_id: request.id,
        },
      );
    }
    request.log.error({ err: error }, 'unhandled error');
    return send(
      reply,
      'server_error',
      `Internal server error. Quote request id ${request.id} when reporting it.`,
      {
        request_id: request.id,
      },
    );
  });

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '/';
    // Echoed in the message: a long path is cut, so a 404 stays small whatever the request.
    const shown = cutPath(path);
    const allowed = methods.allowed(path);
    if (allowed.length > 0) return methodNotAllowed(request, reply, allowed);
    return send(
      reply,
      'not_found',
      `No endpoint ${request.method} ${shown}. See /api/docs for the API reference.`,
    );
  });
}
