import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';

/**
 * Which methods each path takes, from the routes as registered, so that a method a path does not take is 405
 * with `Allow` naming that path's own methods (the contract's fifth part, "The API document, exact"): also where
 * a `/{id}` route of the same prefix would take the request (`GET /api/messages/send` is not message "send"),
 * and for a method the service knows nothing of.
 */
export class RouteMethods {
  /** Paths without parameters -> their methods. */
  private readonly fixed = new Map<string, Set<string>>();
  /** Paths with parameters, as patterns, with their methods. */
  private readonly patterns: Array<{ pattern: RegExp; methods: Set<string> }> = [];
  private readonly byPattern = new Map<string, Set<string>>();

  /** The onRoute hook that records each route (installed before the routes are registered). */
  readonly record = (route: RouteOptions): void => {
    const methods = (Array.isArray(route.method) ? route.method : [route.method]).filter(
      (m) => m !== 'HEAD' && m !== 'OPTIONS',
    );
    if (methods.length === 0) return;
    const url = route.url.length > 1 ? route.url.replace(/\/$/, '') : route.url;
    if (!url.includes(':') && !url.includes('*')) {
      const set = this.fixed.get(url) ?? new Set<string>();
      for (const m of methods) set.add(m);
      this.fixed.set(url, set);
      return;
    }
    let set = this.byPattern.get(url);
    if (!set) {
      set = new Set<string>();
      this.byPattern.set(url, set);
      const source = url
        .split('/')
        .map((s) =>
          s.startsWith(':') ? '[^/]+' : s === '*' ? '.*' : s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
        )
        .join('/');
      this.patterns.push({ pattern: new RegExp(`^${source}$`), methods: set });
    }
    for (const m of methods) set.add(m);
  };

  /** The methods `path` takes: a fixed path's own, else those of the patterns it matches (none: unknown path). */
  allowed(path: string): string[] {
    const bare = path.length > 1 ? path.replace(/\/$/, '') : path;
    const own = this.fixed.get(bare);
    const out = new Set<string>(own);
    if (!own)
      for (const { pattern, methods } of this.patterns)
        if (pattern.test(bare)) for (const m of methods) out.add(m);
    return ORDER.filter((m) => out.has(m));
  }

  /** Whether `path` is a fixed path (one without parameters) of some route. */
  isFixed(path: string): boolean {
    return this.fixed.has(path.length > 1 ? path.replace(/\/$/, '') : path);
  }
}

/** Allow's order. */
const ORDER = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** The methods the service's routes take (HEAD and OPTIONS answered by the framework and CORS). */
const SERVED = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * Installs the rule (after the hooks every answer needs, such as x-request-id; `methods.record` is an onRoute
 * hook installed before the routes): a request routed to a `/{id}` route whose path is in fact a fixed path of other methods is
 * 405 before anything runs (an id is never a route's own word).
 */
export function installMethodRules(
  app: FastifyInstance,
  methods: RouteMethods,
  refuse: (request: FastifyRequest, reply: FastifyReply, allowed: string[]) => void,
): void {
  app.addHook('onRequest', (request, reply, done) => {
    // A method no route takes (QUERY, PROPFIND): answered before its body is looked at.
    if (!SERVED.has(request.method))
      return refuse(request, reply, methods.allowed(request.url.split('?')[0] ?? '/'));
    const pattern = request.routeOptions.url;
    if (!pattern || !pattern.includes(':')) return done();
    const path = request.url.split('?')[0] ?? '/';
    if (!methods.isFixed(path)) return done();
    const allowed = methods.allowed(path);
    if (allowed.includes(request.method)) return done();
    refuse(request, reply, allowed);
  });
}

/**
 * A request no route takes (the not-found route) on a path that other methods take: 405 at once, before its body
 * is parsed (a body the JSON parser refuses would otherwise be a 400 first). Installed after the guard, whose
 * own hook counts such a request in the public bucket first.
 */
export function installEarlyMethodRefusal(
  app: FastifyInstance,
  methods: RouteMethods,
  refuse: (request: FastifyRequest, reply: FastifyReply, allowed: string[]) => void,
): void {
  app.addHook('onRequest', (request, reply, done) => {
    if (!request.is404) return done();
    const allowed = methods.allowed(request.url.split('?')[0] ?? '/');
    if (allowed.length > 0 && !allowed.includes(request.method)) return refuse(request, reply, allowed);
    done();
  });
}
