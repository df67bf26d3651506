// The honest baseline: the least a Node process can do to relay a TCP stream — accept, connect,
// pipe both ways, no parsing. Usage: node bench/node-pipe.mjs <listenPort> <upstreamHost> <upstreamPort>
import { createServer, connect } from 'node:net';

const [listenPort, upHost, upPort] = process.argv.slice(2);
const server = createServer((client) => {
  const upstream = connect({ host: upHost, port: Number(upPort) });
  client.setNoDelay(true);
  upstream.setNoDelay(true);
  client.pipe(upstream);
  upstream.pipe(client);
  const close = () => { client.destroy(); upstream.destroy(); };
  client.on('error', close);
  upstream.on('error', close);
  client.on('close', close);
  upstream.on('close', close);
});
server.listen(Number(listenPort), '127.0.0.1', () => process.stdout.write(`listening ${listenPort}\n`));
process.on('SIGTERM', () => process.exit(0));
