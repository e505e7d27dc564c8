import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import { channels, type Channel, type MessageProvider, type Providers } from './provider.ts';
import { SandboxProvider } from './sandbox.ts';

/** The provider of each channel, as the SMS_PROVIDER / WHATSAPP_PROVIDER / ... settings choose. */
export function createProviders(config: Pick<Config, 'providers'>, log: FastifyBaseLogger): Providers {
  const make = (channel: Channel): MessageProvider => {
    switch (config.providers[channel]) {
      case 'sandbox':
        return new SandboxProvider(channel, log.child({ channel }));
    }
  };
  return Object.fromEntries(channels.map((c) => [c, make(c)])) as Record<Channel, MessageProvider>;
}
