"""Records what `vt-agent serve` answers and sends for a fixed set of WhatsApp, Mattermost and HTTP
conversations (Meta's and Mattermost's payloads from tests/fixtures/payloads, a fake Graph API and
Mattermost on loopback), normalised (ids, times, QR images), so two builds can be compared:

    python3 scripts/record_channels.py target/debug/vt-agent before.txt   # on the old build
    python3 scripts/record_channels.py target/debug/vt-agent after.txt    # on the new one
    diff before.txt after.txt

A refactor that changes nothing a person or a provider sees leaves the two files identical."""
import json, hmac, hashlib, http.server, threading, subprocess, sys, time, os, re, tempfile, urllib.request, urllib.parse, socket
BIN, OUT = sys.argv[1], sys.argv[2]
PAY = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'fixtures', 'payloads') + '/'
log = []
class Fake(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get('content-length', 0)); body = self.rfile.read(n)
        try: b = json.loads(body)
        except Exception: b = re.findall(r'Content-Disposition: [^\r]*', body.decode('latin-1'))
        log.append(('POST', self.path, b))
        out = open(PAY + 'wa-send-message.response.json', 'rb').read() if 'messages' in self.path else b'{"id":"post1"}'
        self.send_response(200); self.send_header('content-type', 'application/json'); self.send_header('content-length', str(len(out))); self.end_headers(); self.wfile.write(out)
    def do_GET(self):
        log.append(('GET', self.path, None)); out=b'{}'
        self.send_response(200); self.send_header('content-length', str(len(out))); self.end_headers(); self.wfile.write(out)
    def log_message(self, *a): pass
def free():
    s = socket.socket(); s.bind(('127.0.0.1', 0)); p = s.getsockname()[1]; s.close(); return p
fake = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Fake)
threading.Thread(target=fake.serve_forever, daemon=True).start()
fport = fake.server_address[1]; port = free()
d = tempfile.mkdtemp()
SECRET = 'app-secret-0123456789'
open(d + '/vt.toml', 'w').write(f'''data_dir = "{d}/data"
[http]
addr = "127.0.0.1:{port}"
[whatsapp]
graph_url = "http://127.0.0.1:{fport}"
phone_number_id = "106540352242922"
access_token = "token-abc"
app_secret = "{SECRET}"
verify_token = "verify"
juntar_ms = 0
[mattermost]
url = "http://127.0.0.1:{fport}"
slash_token = "qzgakf1nx3yt9dr4n8585ihbxy"
actions_secret = "actions-secret-0123456789"
public_url = "http://127.0.0.1:{port}"
''')
env = dict(os.environ, RUST_LOG='warn')
proc = subprocess.Popen([BIN, '--config', d + '/vt.toml', 'serve'], env=env, stdout=subprocess.DEVNULL, stderr=open(d + '/err.log', 'w'))
base = f'http://127.0.0.1:{port}'
for _ in range(200):
    try: urllib.request.urlopen(base + '/healthz', timeout=1); break
    except Exception: time.sleep(0.1)
def post(path, body, headers):
    req = urllib.request.Request(base + path, data=body, headers=headers, method='POST')
    try:
        with urllib.request.urlopen(req, timeout=30) as r: return r.status, r.read().decode()
    except urllib.error.HTTPError as e: return e.code, e.read().decode()
answers = []
def wa(text=None, n=[0], button=None):
    n[0] += 1
    t = json.load(open(PAY + 'wa-webhook-text.json'))
    m = t['entry'][0]['changes'][0]['value']['messages'][0]
    m['id'] = f'wamid.rec{n[0]}'
    m['timestamp'] = str(int(time.time()))
    if button:
        m['type'] = 'interactive'; del m['text']; m['interactive'] = {'type': 'button_reply', 'button_reply': button}
    else: m['text']['body'] = text
    body = json.dumps(t).encode()
    sig = 'sha256=' + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    answers.append(('wa', text or button['title'], post('/channels/whatsapp/webhook', body, {'content-type': 'application/json', 'x-hub-signature-256': sig})))
    time.sleep(1.5)
def mm(text):
    body = open(PAY + 'mm-slash-command.request.body.txt').read().strip()
    body = re.sub(r'text=[^&]*', 'text=' + urllib.parse.quote_plus(text), body).encode()
    answers.append(('mm', text, post('/channels/mattermost/slash', body, {'content-type': 'application/x-www-form-urlencoded', 'authorization': 'Token qzgakf1nx3yt9dr4n8585ihbxy'})))
def http_msg(conv, text):
    answers.append(('http', text, post(f'/v1/conversations/{conv}/messages', json.dumps({'text': text, 'user': {'id': 'ana'}}).encode(), {'content-type': 'application/json'})))
for text in ['oi', 'saldo do cartão 1234567890', 'recarrega 50 no 2345678901 via pix']:
    wa(text)
last = [b for (_, p, b) in log if isinstance(b, dict) and b.get('type') == 'interactive']
if last:
    btn = last[-1]['interactive']['action']['buttons'][0]['reply']
    wa(button=btn)
wa('ajuda'); wa('PARAR'); wa('VOLTAR')
for text in ['saldo do cartão 1234567890', 'recarregar 20 no 2345678901', 'sim', 'ajuda']:
    mm(text)
for text in ['oi', 'saldo 1234567890', 'recarrega 30 no 2345678901 via boleto', 'não', 'tchau']:
    http_msg('rec-http-1', text)
time.sleep(3)
proc.terminate(); proc.wait(timeout=30)
def norm(x):
    s = json.dumps(x, ensure_ascii=False, sort_keys=True)
    s = re.sub(r'\b(conv|exec|caso|rec|task|cob|txid|pix|chk)[-_][A-Za-z0-9_-]+', r'\1-ID', s)
    s = re.sub(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', 'UUID', s)
    s = re.sub(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?', 'TIME', s)
    s = re.sub(r'\b\d{2}/\d{2}(/\d{4})? (às )?\d{2}:\d{2}\b', 'LOCALTIME', s)
    s = re.sub(r'\b\d{2}:\d{2}\b', 'HH:MM', s)
    s = re.sub(r'"(custo|tempo|duration|elapsed|ms|latency)[a-z_]*": *[0-9.]+', r'"\1": N', s)
    s = re.sub(r'[A-Za-z0-9+/]{40,}={0,2}', 'BLOB', s)
    s = re.sub(r'\b[0-9a-f]{32}\b', 'HEX', s)
    s = re.sub(r'--[0-9a-f]{16}-[0-9a-f-]+', '--BOUNDARY', s)
    s = re.sub(r'\bE\d{8,}[0-9a-z]+', 'E2EID', s)
    s = re.sub(r'6304[0-9A-F]{4}\b', '6304CRC', s)
    return s
with open(OUT, 'w') as f:
    for a in answers: f.write(norm(a) + '\n')
    f.write('--- sent to the fakes\n')
    for e in log: f.write(norm(e) + '\n')
print(len(answers), 'answers,', len(log), 'requests to the fakes')
