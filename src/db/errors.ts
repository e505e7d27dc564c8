/** True when a driver error is a unique-constraint violation, on SQLite or PostgreSQL. */
export function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === '23505';
}

/**
 * True when a driver error means "the database cannot answer now" rather than a bug: it cannot be reached,
 * the connection was reset, a time limit passed (pool acquire, connect, statement_timeout, read timeout),
 * a SQLite file is locked by another process, or the database was closed at shutdown. (node-postgres says
 * "Client has encountered a connection error and is not queryable" to a ROLLBACK after a reset: a reset.) The API answers
 * these with 503 `service_unavailable`.
 */
export function isDatabaseUnavailable(error: { code?: unknown; message?: string }): boolean {
  const code = typeof error.code === 'string' ? error.code : '';
  return (
    [
      'ECONNREFUSED',
      'ECONNRESET',
      'ETIMEDOUT',
      'ENOTFOUND',
      'EPIPE',
      // admin_shutdown, cannot_connect_now, too_many_connections, query_canceled (statement_timeout)
      '57P01',
      '57P03',
      '53300',
      '57014',
      'SQLITE_BUSY',
      'SQLITE_LOCKED',
    ].includes(code) ||
    /database connection is not open|Cannot use a pool after calling end|Connection terminated|timeout exceeded when trying to connect|Query read timeout|driver has already been destroyed|Client was closed and is not queryable|Client has encountered a connection error and is not queryable/i.test(
      error.message ?? '',
    )
  );
}
