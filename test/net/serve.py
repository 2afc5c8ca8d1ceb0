# Real HTTP servers for the tests, on Python's http.server: prints its port, then serves until
# killed. Usage: serve.py MODE [CERT KEY [CLIENT_CA]]
#   http10  HTTP/1.0 as http.server speaks it by default: no Content-Length, the body ends at close.
#   http11  HTTP/1.1 keep-alive that closes connections idle for 30 s; paths choose the answer:
#           /204 (no Content-Length), /close (Connection: close, close-delimited), /chunked,
#           /hang (never answers), anything else 200 with Content-Length. Every answer names
#           its connection in X-Connection.
#   http11-idle  the same, closing connections idle for 0.5 s (the idle test's; a loaded machine
#           can take that long between two requests of the other tests).
# With CERT and KEY it speaks TLS; with CLIENT_CA it requires a client certificate from that CA.
import ssl
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

mode = sys.argv[1]
idle_close = {'http11': 30, 'http11-idle': 0.5}.get(mode)
connections = 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1' if idle_close else 'HTTP/1.0'
    timeout = idle_close

    def setup(self):
        global connections
        connections += 1
        self.number = connections
        super().setup()

    def log_message(self, *args):
        pass

    def answer(self):
        length = int(self.headers.get('Content-Length') or 0)
        received = self.rfile.read(length) if length else b''
        path = self.path
        if mode == 'http10':
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'ready ' + path.encode() + b' ' + received)
            return
        if path == '/hang':
            time.sleep(60)
            return
        if path == '/204':
            self.send_response(204)
            self.send_header('X-Connection', str(self.number))
            self.end_headers()
            return
        if path == '/close':
            self.send_response(200)
            self.send_header('X-Connection', str(self.number))
            self.send_header('Connection', 'close')
            self.end_headers()
            self.wfile.write(b'closing')
            self.close_connection = True
            return
        if path == '/chunked':
            self.send_response(200)
            self.send_header('X-Connection', str(self.number))
            self.send_header('Transfer-Encoding', 'chunked')
            self.end_headers()
            for part in (b'{"a":', b'1}'):
                self.wfile.write(b'%x\r\n%s\r\n' % (len(part), part))
            self.wfile.write(b'0\r\n\r\n')
            return
        body = (self.command + ' ' + path + ' ').encode() + received
        self.send_response(200)
        self.send_header('X-Connection', str(self.number))
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = answer


server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
server.daemon_threads = True
if len(sys.argv) > 3:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[2], sys.argv[3])
    if len(sys.argv) > 4:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(sys.argv[4])
    server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
