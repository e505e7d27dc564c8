import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.types.ts';
import type { BuildContext, CallbackKind, ProviderAdapter } from './adapter.ts';
import { exotel } from './exotel/index.ts';
import { msg91 } from './msg91/index.ts';
import { channels, type Channel, type MessageProvider, type Providers } from './provider.ts';
import { sandbox } from './sandbox/index.ts';
import { smtp } from './smtp/index.ts';
import { twilio } from './twilio/index.ts';
import { whatsappCloud } from './whatsapp_cloud/index.ts';

/**
 * Every provider the service speaks to, each one module of `src/providers/<name>/`. This is the one file outside
 * those folders that names them: adding a provider is a folder and a line here (docs/architecture.md).
 */
export const adapters: readonly ProviderAdapter[] = [msg91, exotel, whatsappCloud, twilio, smtp, sandbox];

export const providerNames: readonly string[] = adapters.map((a) => a.name);

const byName = new Map(adapters.map((a) => [a.name, a]));

/** The adapter of a provider name, or undefined for a name no adapter has. */
export function adapterOf(name: string): ProviderAdapter | undefined {
  return byName.get(name);
}

/** The adapter of a stored provider name (an account's): it exists, or the stored row is from a removed provider. */
export function adapterNamed(name: string): ProviderAdapter {
  const found = byName.get(name);
  if (!found) throw new Error(`no provider adapter is named ${name}`);
  return found;
}

/** Whether a provider reaches no one (its messages are simulated). */
export const isSimulated = (name: string): boolean => adapterOf(name)?.simulated !== undefined;

/** Providers whose messages are simulated (they settle by age). */
export const simulatedAdapters: readonly ProviderAdapter[] = adapters.filter((a) => a.simulated);

/** A channel's deployment provider when its `<CHANNEL>_PROVIDER` is unset: the simulated one. */
export const defaultDeploymentProvider: string = simulatedAdapters[0]!.name;

/** Providers that keep templates of their own (`provider_template_ids` keys). */
export const templateProviders: readonly ProviderAdapter[] = adapters.filter((a) => a.templates);

/** Providers that can be a channel's deployment provider (SMS_PROVIDER=...). */
export const deploymentAdapters: readonly ProviderAdapter[] = adapters.filter((a) => a.deployment);

export type ProviderBuildConfig = Pick<
  Config,
  'providers' | 'providerEnv' | 'deployment' | 'sandboxDeliveryDelayMs' | 'delivery' | 'publicBaseUrl'
>;

/** A provider built by its adapter, with the configuration's API URL, environment and time limits. */
export function buildProvider(
  adapter: ProviderAdapter,
  config: Pick<Config, 'providerEnv' | 'sandboxDeliveryDelayMs' | 'delivery'>,
  log: FastifyBaseLogger,
  context: Pick<BuildContext, 'channel' | 'settings' | 'credentials' | 'callbackUrl' | 'ownAccount'>,
): MessageProvider {
  const env = config.providerEnv[adapter.name];
  return adapter.create({
    ...context,
    apiUrl: env?.apiUrl ?? '',
    env: env?.values ?? {},
    timeoutMs: config.delivery.providerTimeoutMs,
    log,
    sandboxDelayMs: config.sandboxDeliveryDelayMs,
  });
}

/** The deployment's callback URL of a kind: `<PUBLIC_BASE_URL>/api/providers/<name>/<kind>` ('' without it). */
export function deploymentCallbackUrl(
  publicBaseUrl: string | undefined,
  name: string,
  kind: CallbackKind,
): string {
  return publicBaseUrl ? `${publicBaseUrl}/api/providers/${name}/${kind}` : '';
}

/** The provider of each channel, as the SMS_PROVIDER / WHATSAPP_PROVIDER / ... settings choose. */
export function createProviders(config: ProviderBuildConfig, log: FastifyBaseLogger): Providers {
  const make = (channel: Channel): MessageProvider => {
    const adapter = adapterNamed(config.providers[channel]);
    if (!adapter.channels.includes(channel)) throw new Error(`${adapter.name} cannot send ${channel}`);
    const own = config.deployment[adapter.name] ?? { settings: {}, credentials: {} };
    return buildProvider(adapter, config, log, {
      channel,
      ...own,
      callbackUrl: (kind) => deploymentCallbackUrl(config.publicBaseUrl, adapter.name, kind),
      ownAccount: false,
    });
  };
  return Object.fromEntries(channels.map((c) => [c, make(c)])) as Record<Channel, MessageProvider>;
}
