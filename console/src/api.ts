import createClient, { type Middleware } from 'openapi-fetch';
import type { paths } from './schema.d.ts';

const TOKEN_KEY = 'ces.token';

/** The access token lives in sessionStorage only: gone when the tab closes, on sign-out and on any 401. */
export const session = {
  token: (): string | null => sessionStorage.getItem(TOKEN_KEY),
  set(token: string) {
    sessionStorage.setItem(TOKEN_KEY, token);
  },
  clear() {
    sessionStorage.removeItem(TOKEN_KEY);
    sessionStorage.removeItem('ces.me');
  },
};

/** Called after a 401 drops the token (the app goes back to sign-in). */
let onSignedOut: () => void = () => {};
export function whenSignedOut(listener: () => void) {
  onSignedOut = listener;
}

/** An answer of the API that is not a success: its `error_code`, its `message` for the person, its details. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

const auth: Middleware = {
  onRequest({ request }) {
    const token = session.token();
    if (token) request.headers.set('authorization', `Bearer ${token}`);
    return request;
  },
  onResponse({ response, request }) {
    if (response.status === 401 && request.headers.has('authorization')) {
      session.clear();
      onSignedOut();
    }
    return response;
  },
};

/** The typed client: paths, parameters and bodies come from the service's OpenAPI document (schema.d.ts). */
export const api = createClient<paths>({ baseUrl: '' });
api.use(auth);

interface Envelope {
  error_code?: string;
  message?: string;
  details?: Record<string, unknown>;
}

function failure(status: number, body: unknown): ApiError {
  const e = (body ?? {}) as Envelope;
  return new ApiError(
    status,
    e.error_code ?? 'error',
    e.message ?? `The service answered ${status}.`,
    e.details,
  );
}

/** The `data` of a success, or the API's error (its message shown as it is) thrown as an ApiError. */
export async function data<T>(
  call: Promise<{ data?: { data: T }; error?: unknown; response: Response }>,
): Promise<T> {
  const { data: body, error, response } = await call;
  if (error !== undefined || !body) throw failure(response.status, error);
  return body.data;
}

/**
 * Every page of a list (a picker must offer every segment, template or member, not the first 100): `page(n)`
 * reads page n; the answer is shaped as one page holding them all. At most `most` pages are read.
 */
export async function allPages<T, P extends { data: T[]; last_page: number; total: number }>(
  page: (n: number) => Promise<P>,
  most = 50,
): Promise<P> {
  const first = await page(1);
  const rest = [];
  for (let n = 2; n <= Math.min(first.last_page, most); n++) rest.push(page(n));
  const more = (await Promise.all(rest)).flatMap((p) => p.data);
  return { ...first, data: [...first.data, ...more], current_page: 1, last_page: 1 };
}

/** The whole success envelope (for `message`), or the API's error. */
export async function envelope<B extends { message?: string }>(
  call: Promise<{ data?: B; error?: unknown; response: Response }>,
): Promise<B> {
  const { data: body, error, response } = await call;
  if (error !== undefined || !body) throw failure(response.status, error);
  return body;
}

/** A call the typed client cannot make (a multipart upload, a file download), with the same token and 401 rule. */
export async function raw(path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  const token = session.token();
  if (token) headers.set('authorization', `Bearer ${token}`);
  const response = await fetch(path, { ...init, headers });
  if (response.status === 401 && token) {
    session.clear();
    onSignedOut();
  }
  if (!response.ok) throw failure(response.status, await response.json().catch(() => null));
  return response;
}

/** POSTs `file` as the multipart part `file` (what the API's imports read); the answer's `data`. */
export async function uploadFile<T>(
  path: string,
  file: File,
  headers: Record<string, string> = {},
  /** Plain fields, sent before the file part (an import's `mapping`). */
  fields: Record<string, string> = {},
): Promise<T> {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  form.append('file', file, file.name);
  const res = await raw(path, { method: 'POST', body: form, headers });
  return ((await res.json()) as { data: T }).data;
}

/** Saves a download (an export, an import's errors) under `name` without putting anything in the URL bar. */
export async function download(path: string, name: string): Promise<void> {
  const blob = await (await raw(path)).blob();
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/**
 * The live event stream (GET /api/events/stream) read with fetch, so that the token goes in a header and not
 * in the URL. Reconnects with Last-Event-ID after a drop; `stop` ends it.
 */
export function liveEvents(onEvent: (type: string, data: Record<string, unknown>) => void): () => void {
  let stopped = false;
  let controller = new AbortController();
  let lastId = '';
  const run = async () => {
    while (!stopped) {
      try {
        controller = new AbortController();
        const headers: Record<string, string> = {};
        const token = session.token();
        if (!token) return;
        headers.authorization = `Bearer ${token}`;
        if (lastId) headers['last-event-id'] = lastId;
        const res = await fetch('/api/events/stream', { headers, signal: controller.signal });
        if (res.status === 401) {
          session.clear();
          onSignedOut();
          return;
        }
        if (!res.ok || !res.body) throw new Error(String(res.status));
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const id = /^id: (.+)$/m.exec(block)?.[1];
            const type = /^event: (.+)$/m.exec(block)?.[1];
            const json = /^data: (.+)$/m.exec(block)?.[1];
            if (id) lastId = id;
            if (type && json) onEvent(type, JSON.parse(json) as Record<string, unknown>);
          }
        }
      } catch {
        // dropped or stopped: wait, then resume from lastId
      }
      if (!stopped) await new Promise((resolve) => setTimeout(resolve, 3000));
    }
  };
  void run();
  return () => {
    stopped = true;
    controller.abort();
  };
}
