import pino from 'pino';
import { loggerOptions } from './app.ts';
import { type Config, ConfigError, defaultKeyFile, loadConfig } from './config.ts';
import { connect, type Db } from './db/connect.ts';
import { migrateToLatest } from './db/migrate.ts';

/** What the log may hold back, in bytes, while its reader (a pipe, a log shipper) is not reading. */
const LOG_BACKLOG_BYTES = 4 * 1024 * 1024;

/**
 * Standard output for the logs, which never waits for a reader that does not read. pino's default
 * destination writes to file descriptor 1 itself and retries a full pipe forever, in 100 ms sleeps of the
 * whole thread (or blocks in the kernel): servers whose output nobody read stopped serving and were deaf to
 * SIGTERM. process.stdout writes at once when the reader keeps up (a file or a terminal synchronously; a pipe
 * as far as it takes), so a line (the sandbox's record of a message handed over) is out before a crash that
 * follows it; behind a full pipe it keeps up to LOG_BACKLOG_BYTES in memory and the lines beyond are dropped.
 */
export function logDestination(stream: NodeJS.WriteStream = process.stdout): pino.DestinationStream {
  stream.on('error', () => {}); // a reader gone away (EPIPE) must not stop the process
  return {
    write(line: string) {
      if (stream.writableLength > LOG_BACKLOG_BYTES) return;
      stream.write(line);
    },
  };
}

/**
 * What every long-running process starts with: the configuration (a bad setting stops the process with a
 * message naming it), the database with migrations applied, and the logger (logDestination) that the API
 * and the background loops share.
 */
export async function bootstrap(): Promise<{ config: Readonly<Config>; db: Db; log: pino.Logger }> {
  let config: Readonly<Config>;
  try {
    config = loadConfig(process.env, { keyFile: defaultKeyFile() });
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      process.exit(1);
    }
    throw error;
  }
  const db = connect(config.databaseUrl, config.database);
  await migrateToLatest(db);
  const log = pino(loggerOptions(config.logLevel) as pino.LoggerOptions, logDestination());
  return { config, db, log };
}

/**
 * Calls `stop` on SIGTERM or SIGINT, and when the process that started this one goes away. `npm start`
 * runs node through `sh -c`, and on SIGTERM npm passes the signal to that shell, which dies of it without
 * passing it on: node is left running as an orphan. So a process started by npm takes its parent's end for
 * the signal that npm could not hand it (checked every PARENT_CHECK_MS) and stops the same way.
 */
export function onStopSignal(stop: (signal: string) => void): void {
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  if (process.env.npm_lifecycle_event === undefined) return;
  const parent = process.ppid;
  const check = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(check);
    stop('parent exited');
  }, PARENT_CHECK_MS);
  check.unref();
}

const PARENT_CHECK_MS = 200;
