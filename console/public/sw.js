// The console's service worker (the contract's fourth part, "Offline"): it keeps the app shell (index.html and its
// hashed assets) so that the field screens open with the network gone. It never keeps an API answer: the walk
// lists and the queue live in IndexedDB (src/field-store.ts), which signing out deletes.
const CACHE = 'ces-console-v1';
const INDEX = '/console/';

/** Keeps the index and every asset it names; drops the assets of older builds. */
async function keepShell(response) {
  const cache = await caches.open(CACHE);
  const html = await response.clone().text();
  await cache.put(INDEX, response);
  const assets = [...html.matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)].map((m) => m[1]);
  await cache.addAll(assets.filter((a, i) => assets.indexOf(a) === i));
  for (const request of await cache.keys()) {
    const path = new URL(request.url).pathname;
    if (path.startsWith('/console/assets/') && !assets.includes(path)) await cache.delete(request);
  }
}

self.addEventListener('install', (event) => {
  event.waitUntil(
    fetch(INDEX, { cache: 'no-store' })
      .then((response) => (response.ok ? keepShell(response) : undefined))
      .then(() => self.skipWaiting()),
  );
});

self.addEventListener('activate', (event) => {
  event.waitUntil(
    caches
      .keys()
      .then((keys) => Promise.all(keys.filter((key) => key !== CACHE).map((key) => caches.delete(key))))
      .then(() => self.clients.claim()),
  );
});

self.addEventListener('fetch', (event) => {
  const request = event.request;
  if (request.method !== 'GET') return;
  const url = new URL(request.url);
  // Only the console's own files; the API is always the network's.
  if (url.origin !== self.location.origin || !url.pathname.startsWith('/console')) return;
  if (request.mode === 'navigate') {
    // The network first (a new build is seen at once); without it, the kept shell.
    event.respondWith(
      fetch(request)
        .then((response) => {
          if (response.ok) event.waitUntil(keepShell(response.clone()).catch(() => undefined));
          return response;
        })
        .catch(() => caches.match(INDEX).then((kept) => kept ?? Response.error())),
    );
    return;
  }
  if (url.pathname.startsWith('/console/assets/')) {
    // Hashed names never change: the kept copy first.
    event.respondWith(
      caches.match(request).then(
        (kept) =>
          kept ??
          fetch(request).then((response) => {
            if (response.ok) {
              const copy = response.clone();
              event.waitUntil(caches.open(CACHE).then((cache) => cache.put(request, copy)));
            }
            return response;
          }),
      ),
    );
  }
});
