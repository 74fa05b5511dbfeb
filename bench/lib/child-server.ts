import type http from 'node:http';

/**
 * Inside a server the harness runs as a child process: listens on 127.0.0.1 (any free port),
 * prints `{"port":N}` once listening, and closes (`close`, then exit) on SIGTERM or SIGINT or
 * when its stdin ends (the harness died). A close that hangs is cut after 5 s.
 */
export function serveAsChild(server: http.Server, close: () => Promise<unknown>): void {
  let closing = false;
  const stop = () => {
    if (closing) return;
    closing = true;
    setTimeout(() => process.exit(1), 5_000).unref();
    void close().then(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdin.on('end', stop);
  process.stdin.on('error', stop);
  process.stdin.resume();
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    if (typeof address !== 'object' || address === null) throw new Error('no address to announce');
    process.stdout.write(`${JSON.stringify({ port: address.port })}\n`);
  });
}
