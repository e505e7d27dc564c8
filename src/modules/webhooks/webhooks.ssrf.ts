import { promises as dns, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/**
 * SSRF rules for webhook URLs. A URL must be http or https, and (unless WEBHOOK_ALLOW_PRIVATE_URLS) its
 * host must not be, or resolve to, an address of the machine or a private network. The check runs when an
 * endpoint is saved and again inside the socket's own DNS lookup at every connect, so a name that resolves
 * to a public address at creation and to 127.0.0.1 later (DNS rebinding) is refused before a connection
 * is attempted. Redirects are never followed.
 */

/** Resolves a host name to all its addresses. Injected so tests can play DNS. */
export type Resolver = (hostname: string) => Promise<LookupAddress[]>;

export const systemResolver: Resolver = (hostname) => dns.lookup(hostname, { all: true, verbatim: true });

// Two lists: Node's BlockList matches IPv4 addresses against IPv6 rules through their IPv4-mapped form, so
// one list holding ::ffff:0:0/96 would block every IPv4 address.
const blockedV4 = new BlockList();
const blockedV6 = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local (cloud metadata lives here)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  blockedV4.addSubnet(network, prefix, 'ipv4');
}
// Every IPv6 range that carries an IPv4 address inside it is blocked whole: the embedded address would
// otherwise have to be decoded and checked per form, and none of these forms is needed to reach a webhook.
for (const [network, prefix] of [
  ['::', 96], // unspecified, loopback and IPv4-compatible (::127.0.0.1, deprecated)
  ['::ffff:0:0', 96], // IPv4-mapped (::ffff:127.0.0.1)
  ['::ffff:0:0:0', 96], // IPv4-translated, SIIT (::ffff:0:127.0.0.1)
  ['64:ff9b::', 96], // NAT64, well-known prefix
  ['64:ff9b:1::', 48], // NAT64, local-use prefixes
  ['2002::', 16], // 6to4 (2002:7f00:1:: is 127.0.0.1; deprecated)
  ['2001::', 32], // Teredo (embeds its server and client IPv4 addresses)
  ['100::', 64], // discard-only
  ['fc00::', 7], // unique-local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
] as const) {
  blockedV6.addSubnet(network, prefix, 'ipv6');
}

/** True when the address is loopback, private, link-local, unique-local, IPv4-mapped IPv6 or otherwise not public. */
export function isBlockedAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blockedV4.check(address, 'ipv4');
  if (family === 6) return blockedV6.check(address.split('%')[0]!, 'ipv6');
  return true;
}

export class BlockedUrlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BlockedUrlError';
  }
}

/** The URL's host without IPv6 brackets. */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

/** Parses and checks a webhook URL's form: http(s), a host, no credentials. Returns the problem or the URL. */
export function parseWebhookUrl(raw: string): URL | string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'must be an absolute http or https URL.';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must use https (or http).';
  if (!url.hostname) return 'must name a host.';
  if (url.username || url.password) return 'must not carry a user name or password.';
  return url;
}

/**
 * Resolves the URL's host and refuses it when any address is blocked. Used when an endpoint is saved; the
 * connect-time lookup below repeats the check for every connection.
 */
export async function checkDestination(url: URL, resolver: Resolver): Promise<void> {
  const host = hostOf(url);
  if (isIP(host)) {
    if (isBlockedAddress(host))
      throw new BlockedUrlError(`${host} is a private, loopback or link-local address.`);
    return;
  }
  let addresses: LookupAddress[];
  try {
    addresses = await resolver(host);
  } catch {
    throw new BlockedUrlError(`the host ${host} does not resolve.`);
  }
  if (addresses.length === 0) throw new BlockedUrlError(`the host ${host} does not resolve.`);
  const bad = addresses.find((a) => isBlockedAddress(a.address));
  if (bad) {
    throw new BlockedUrlError(
      `the host ${host} resolves to ${bad.address}, a private, loopback or link-local address.`,
    );
  }
}

/**
 * A `lookup` for node:net / node:http that resolves through `resolver` and fails the connection, before any
 * socket connects, when an address is blocked. Handles both the single-address and the `all` form (Node's
 * happy-eyeballs connect asks for all addresses).
 */
export function guardedLookup(resolver: Resolver, allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    resolver(hostname)
      .then((found) => {
        const family: unknown = options.family;
        const wanted = family === 4 || family === 'IPv4' ? 4 : family === 6 || family === 'IPv6' ? 6 : 0;
        const addresses = wanted ? found.filter((a) => a.family === wanted) : found;
        if (addresses.length === 0)
          throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
        if (!allowPrivate) {
          const bad = addresses.find((a) => isBlockedAddress(a.address));
          if (bad) {
            throw new BlockedUrlError(
              `refused to connect: ${hostname} resolves to ${bad.address}, a private, loopback or link-local address.`,
            );
          }
        }
        if (options.all) callback(null, addresses);
        else callback(null, addresses[0]!.address, addresses[0]!.family);
      })
      .catch((error: NodeJS.ErrnoException) => callback(error, '', 0));
  };
}
