/**
 * The reference of `npm run bench:hot-path`: a bare Fastify hello world (no plugins, no logger), started by
 * the bench as a child process with the same Node.js flags as the service. PORT and HOST as for the server.
 */
import Fastify from 'fastify';

const app = Fastify({ logger: false });
app.get('/', async () => ({ hello: 'world' }));
await app.listen({ port: Number(process.env.PORT ?? 3001), host: process.env.HOST ?? '127.0.0.1' });
process.on('SIGTERM', () => {
  void app.close().then(() => process.exit(0));
});
