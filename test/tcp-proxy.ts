import net from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 to a target port that a test can cut (every open connection
 * destroyed, new ones refused: the network between service and server gone) and restore on
 * the same port, without touching the server itself, which other tests share.
 */
export class TcpProxy {
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  port = 0;

  constructor(
    private readonly targetPort: number,
    private readonly targetHost = '127.0.0.1',
  ) {}

  async start(): Promise<this> {
    const server = net.createServer((client) => {
      const upstream = net.connect(this.targetPort, this.targetHost);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('error', () => undefined);
        s.on('close', () => {
          this.sockets.delete(s);
          client.destroy();
          upstream.destroy();
        });
      }
      this.connected(client, upstream);
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as net.AddressInfo).port;
    this.server = server;
    return this;
  }

  /** Sees each connection's two ends before they are piped together: a subclass may watch them. */
  protected connected(_client: net.Socket, _upstream: net.Socket): void {}

  /** Destroys every connection and stops listening: connections are refused until `restore`. */
  async cut(): Promise<void> {
    const server = this.server;
    this.server = null;
    const closed = server ? new Promise((resolve) => server.close(resolve)) : null;
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    await closed;
  }

  /** Listens again on the same port. */
  async restore(): Promise<void> {
    await this.start();
  }

  async close(): Promise<void> {
    await this.cut();
  }
}
