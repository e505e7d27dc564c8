import pino from 'pino';
import { loggerOptions } from './app.ts';
import { type Config, ConfigError, defaultKeyFile, loadConfig } from './config.ts';
import { connect, type Db } from './db/connect.ts';
import { migrateToLatest } from './db/migrate.ts';

/**
 * What every long-running process starts with: the configuration (a bad setting stops the process with a
 * message naming it), the database with migrations applied, and the logger. Logs are written synchronously
 * so that a line (the sandbox's record of a message handed over) survives a crash that follows it.
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
  await migrateToLatest(db.kysely);
  const log = pino(
    loggerOptions(config.logLevel) as pino.LoggerOptions,
    pino.destination({ dest: 1, sync: true }),
  );
  return { config, db, log };
}
