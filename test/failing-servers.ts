import net from 'node:net';
import type { AddressInfo } from 'node:net';

/** How a target fails before any HTTP response: what a port scan would tell apart. */
export type Failure = 'refused' | 'reset' | 'closed' | 'not-tls' | 'silent';

/**
 * Local ports on 127.0.0.1 that each fail in their own way at the connection level: nothing
 * listening, a reset as soon as it connects, a clean close, a banner that is not TLS (an SSH
 * server), and a connection accepted then never answered.
 */
export async function startFailingServers(): Promise<{
  ports: Record<Failure, number>;
  close(): Promise<void>;
}> {
  const sockets = new Set<net.Socket>();
  const listen = async (onConnection: (socket: net.Socket) => void) => {
    const server = net.createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => sockets.delete(socket));
      onConnection(socket);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return server;
  };
  const servers = {
    refused: await listen(() => undefined),
    reset: await listen((socket) => socket.resetAndDestroy()),
    closed: await listen((socket) => socket.end()),
    'not-tls': await listen((socket) => socket.write('SSH-2.0-OpenSSH_9.6\r\n')),
    silent: await listen(() => undefined),
  };
  const portOf = (server: net.Server) => (server.address() as AddressInfo).port;
  const ports = Object.fromEntries(
    Object.entries(servers).map(([failure, server]) => [failure, portOf(server)]),
  ) as Record<Failure, number>;
  // Nothing listens there any more: connecting is refused.
  await new Promise<void>((resolve) => servers.refused.close(() => resolve()));
  return {
    ports,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await Promise.all(
        Object.entries(servers)
          .filter(([failure]) => failure !== 'refused')
          .map(([, server]) => new Promise<void>((resolve) => server.close(() => resolve()))),
      );
    },
  };
}
