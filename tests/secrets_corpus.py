"""A labelled corpus for secret redaction: planted secrets in every place they hide in Copilot history, and
look-alikes from the real samples that hold none.

``planted()``: (kind, place, what is redacted - a text or parsed JSON -, the secret) for every token format
the redactor names and every way a value is named secret, each in the places Copilot's logs carry text: a
prompt, a tool's output (an ``.env`` file, a config dump, a command's output), a command line, tool
arguments and an MCP server's configuration (parsed JSON), a URL, a header. The secrets are made up (a
seeded random), in the shape of the real thing.

``lookalikes()``: lines of ``tests/data/lookalikes.txt`` - lines of the real samples (``../shared``) that
name tokens, passwords, keys and credentials without holding one (code, placeholders, test output), and
their ids, hashes and UUIDs - each of which must come out of redaction unchanged.

``measure(redact_text, redact_json)`` scores a redactor on both; ``tools/secrets_compare.py`` scores other
rule sets on the same corpus.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

LOOKALIKES = Path(__file__).parent / "data" / "lookalikes.txt"
_ALNUM = string.ascii_letters + string.digits


@dataclass(frozen=True)
class Case:
    kind: str
    place: str
    value: object  # a text, or parsed JSON (dict / list)
    secret: str


def _r(rng: random.Random, n: int, alphabet: str = _ALNUM) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _tokens(rng: random.Random) -> dict[str, str]:
    """One made-up token of each format the redactor names (the kind is its marker's name)."""
    hexa, upper = "0123456789abcdef", string.ascii_uppercase + string.digits
    b64 = string.ascii_letters + string.digits + "+/"
    url = string.ascii_letters + string.digits + "_-"
    pem = "\n".join(_r(rng, 64, b64) for _ in range(6))
    return {
        "github_token": "ghp_" + _r(rng, 36),
        "github_pat": "github_pat_" + _r(rng, 22) + "_" + _r(rng, 59),
        "aws_access_key": "AKIA" + _r(rng, 16, upper),
        "slack_token": f"xoxb-{_r(rng, 11, string.digits)}-{_r(rng, 12, string.digits)}-{_r(rng, 24)}",
        "slack_webhook": f"https://hooks.slack.com/services/T{_r(rng, 8, upper)}/B{_r(rng, 10, upper)}/{_r(rng, 24)}",
        "discord_webhook": f"https://discord.com/api/webhooks/{_r(rng, 18, string.digits)}/{_r(rng, 68, url)}",
        "jwt": "eyJ" + _r(rng, 30, url) + ".eyJ" + _r(rng, 60, url) + "." + _r(rng, 43, url),
        "openai_key": "sk-proj-" + _r(rng, 48, url),
        "anthropic_key": "sk-ant-api03-" + _r(rng, 93, url) + "AA",
        "huggingface_token": "hf_" + _r(rng, 34),
        "gitlab_token": "glpat-" + _r(rng, 20, url),
        "google_oauth_secret": "GOCSPX-" + _r(rng, 28, url),
        "google_api_key": "AIza" + _r(rng, 35, url),
        "stripe_key": "sk_live_" + _r(rng, 24),
        "npm_token": "npm_" + _r(rng, 36),
        "pypi_token": "pypi-AgEIcHlwaS5vcmc" + _r(rng, 70, url),
        "sendgrid_key": "SG." + _r(rng, 22, url) + "." + _r(rng, 43, url),
        "twilio_key": "SK" + _r(rng, 32, hexa),
        "discord_token": "M" + _r(rng, 25, url) + "." + _r(rng, 6, url) + "." + _r(rng, 38, url),
        "telegram_bot_token": _r(rng, 10, string.digits) + ":AA" + _r(rng, 33, url),
        "digitalocean_token": "dop_v1_" + _r(rng, 64, hexa),
        "docker_token": "dckr_pat_" + _r(rng, 27, url),
        "vault_token": "hvs." + _r(rng, 90, url),
        "databricks_token": "dapi" + _r(rng, 32, hexa),
        "shopify_token": "shpat_" + _r(rng, 32, hexa),
        "linear_key": "lin_api_" + _r(rng, 40),
        "doppler_token": "dp.pt." + _r(rng, 43),
        "grafana_token": "glsa_" + _r(rng, 32) + "_" + _r(rng, 8, hexa),
        "newrelic_key": "NRAK-" + _r(rng, 27, upper),
        "postman_key": "PMAK-" + _r(rng, 24, hexa) + "-" + _r(rng, 34, hexa),
        "age_secret_key": "AGE-SECRET-KEY-1" + _r(rng, 58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"),
        "private_key": f"-----BEGIN RSA PRIVATE KEY-----\n{pem}\n-----END RSA PRIVATE KEY-----",
        # the formats that name themselves by a prefix, added from gitleaks' default rules and AI providers'
        "perplexity_key": "pplx-" + _r(rng, 48),
        "groq_key": "gsk_" + _r(rng, 52),
        "xai_key": "xai-" + _r(rng, 80),
        "openrouter_key": "sk-or-v1-" + _r(rng, 64, hexa),
        "deepseek_key": "sk-" + _r(rng, 32, hexa),
        "replicate_token": "r8_" + _r(rng, 37),
        "langsmith_key": "lsv2_pt_" + _r(rng, 32, hexa) + "_" + _r(rng, 10, hexa),
        "google_oauth_token": "ya29.a0" + _r(rng, 150, url),
        "google_oauth_token (refresh)": "1//0" + _r(rng, 100, url),
        "pulumi_token": "pul-" + _r(rng, 40, hexa),
        "planetscale_token": "pscale_tkn_" + _r(rng, 43, url),
        "sentry_token": "sntryu_" + _r(rng, 64, hexa),
        "notion_token": "ntn_" + _r(rng, 11, string.digits) + _r(rng, 35),
        "notion_token (legacy)": "secret_" + _r(rng, 43),
        "airtable_token": "pat" + _r(rng, 14) + "." + _r(rng, 64, hexa),
        "flyio_token": "fm2_" + _r(rng, 180, b64) + "==",
        "heroku_key": "HRKU-AA" + _r(rng, 58, url),
        "cloudflare_origin_ca_key": "v1.0-" + _r(rng, 24, hexa) + "-" + _r(rng, 146, hexa),
        "prefect_token": "pnu_" + _r(rng, 36),
        "rubygems_token": "rubygems_" + _r(rng, 48, hexa),
        "readme_token": "rdme_" + _r(rng, 70, string.ascii_lowercase + string.digits),
        "sendinblue_key": "xkeysib-" + _r(rng, 64, hexa) + "-" + _r(rng, 16),
        "square_token": "sq0atp-" + _r(rng, 22, url),
        "shippo_token": "shippo_live_" + _r(rng, 40, hexa),
        "infracost_token": "ico-" + _r(rng, 32),
        "artifactory_key": "AKCp" + _r(rng, 69),
        "tailscale_key": "tskey-auth-" + _r(rng, 12) + "CNTRL-" + _r(rng, 32),
        "onepassword_token": "ops_eyJ" + _r(rng, 300, b64) + "=",
        "aws_bedrock_key": "ABSK" + _r(rng, 132, b64) + "=",
        "facebook_token": "EAAM" + _r(rng, 120),
        "dynatrace_token": "dt0c01." + _r(rng, 24, upper) + "." + _r(rng, 64, upper),
        "easypost_key": "EZAK" + _r(rng, 54),
        "openshift_token": "sha256~" + _r(rng, 43, url),
        "sourcegraph_token": "sgp_" + _r(rng, 16, hexa) + "_" + _r(rng, 40, hexa),
        "clickhouse_key": "4b1d" + _r(rng, 38),
        "alibaba_key": "LTAI" + _r(rng, 20),
        "huggingface_token (organization)": "api_org_" + _r(rng, 34, string.ascii_letters),
        "grafana_token (api key)": "eyJrIjoi" + _r(rng, 90),
        "mapbox_secret_token": "sk.eyJ1Ijoi" + _r(rng, 60, url) + "." + _r(rng, 22, url),
        "posthog_personal_key": "phx_" + _r(rng, 43),
        "resend_key": "re_" + _r(rng, 8) + "_" + _r(rng, 24),
        "figma_token": "figd_" + _r(rng, 40, url),
        "neon_key": "napi_" + _r(rng, 64, string.ascii_lowercase + string.digits),
        "render_key": "rnd_" + _r(rng, 32),
        "supabase_token": "sbp_" + _r(rng, 40, hexa),
        "hubspot_token": "pat-na1-" + "-".join(_r(rng, n, hexa) for n in (8, 4, 4, 4, 12)),
        "twitch_token": "oauth:" + _r(rng, 30, string.ascii_lowercase + string.digits),
    }


def _password(rng: random.Random) -> str:
    """A made-up password or key, as people choose and tools generate them."""
    return rng.choice([
        lambda: _r(rng, 8, string.ascii_lowercase) + _r(rng, 3, string.digits) + rng.choice("!#%*"),
        lambda: _r(rng, 24),
        lambda: base64.b64encode(rng.randbytes(24)).decode(),
        lambda: "".join(rng.choice("0123456789abcdef") for _ in range(40)),
        lambda: "-".join((_r(rng, 6, string.ascii_lowercase), _r(rng, 6, string.ascii_lowercase),
                          _r(rng, 4, string.digits))),
    ])()


def planted(seed: int = 27) -> list[Case]:
    rng = random.Random(seed)
    cases: list[Case] = []
    # every token format, in the places text of Copilot's logs comes from
    token_places = [
        ("prompt", lambda s: f"use this key to call the API: {s} and retry"),
        ("tool output, .env file", lambda s: f"PORT=8000\nSERVICE_CREDENTIAL={s}\nDEBUG=false\n"),
        ("tool output, JSON config", lambda s: json.dumps({"service": {"endpoint": "https://api.example.com",
                                                                      "value": s}}, indent=2)),
        ("command line", lambda s: f"curl -s -d '{s}' https://api.example.com/v1/check"),
        ("tool arguments (parsed JSON)", lambda s: {"command": f"deploy --with {s}", "description": "deploy"}),
    ]
    for kind, token in _tokens(rng).items():
        for place, make in token_places:
            cases.append(Case(kind, place, make(token), token))
    # values named secret: the syntaxes of .env files, YAML, JSON, code, headers, command lines, URLs
    named = [
        ("env line SECRET_KEY", lambda v: f"SECRET_KEY={v}\n"),
        ("env line SECRET_KEY_BASE", lambda v: f"SECRET_KEY_BASE={v}\n"),
        ("env line DB_PASS", lambda v: f"DB_HOST=db\nDB_PASS={v}\n"),
        ("env line ENCRYPTION_KEY", lambda v: f"export ENCRYPTION_KEY={v}\n"),
        ("env line PRIVATE_KEY", lambda v: f"PRIVATE_KEY=\"{v}\"\n"),
        ("env line MAIL_PASS", lambda v: f"MAIL_USER=ana\nMAIL_PASS={v}\n"),
        ("env line spaced", lambda v: f"DATABASE_PASSWORD = {v}\n"),
        ("docker compose", lambda v: f"    environment:\n      - POSTGRES_PASSWORD={v}\n"),
        ("yaml", lambda v: f"database:\n  user: app\n  password: {v}\n"),
        ("yaml quoted", lambda v: f"api:\n  client_secret: \"{v}\"\n"),
        ("json text", lambda v: json.dumps({"auth": {"apiKey": v}})),
        ("json text nested escaped", lambda v: json.dumps({"body": json.dumps({"password": v})})),
        ("python literal", lambda v: f"client = Client(api_key=\"{v}\")"),
        ("python assignment", lambda v: f"password = '{v}'"),
        ("js object", lambda v: f"const cfg = {{ token: '{v}', retries: 3 }};"),
        ("js fallback", lambda v: f"const apiToken = process.env.API_TOKEN || '{v}';"),
        ("powershell", lambda v: f"$env:GATEWAY_PASSWORD = \"{v}\""),
        ("csharp", lambda v: f"var connectionString = \"Server=db;User Id=sa;Password={v};\";"),
        ("ini", lambda v: f"[smtp]\nhost = mail\npasswd = {v}\n"),
        ("header", lambda v: f"curl -H \"X-API-Key: {v}\" https://api.example.com"),
        ("header cookie", lambda v: f"Cookie: session_token={v}"),
        ("bearer", lambda v: f"Authorization: Bearer {v}"),
        ("cli flag", lambda v: f"mysql -u root --password {v} app"),
        ("cli flag =", lambda v: f"gh auth login --with-token --token={v}"),
        ("cli basic auth", lambda v: f"curl -u ana:{v} https://example.com/api"),
        ("cli basic auth quoted", lambda v: f'curl.exe -sS -u "ana:{v}" -X POST https://example.com/api'),
        ("url password", lambda v: f"postgres://app:{v}@db.internal:5432/app"),
        ("url password percent-encoded", lambda v: f"vscode-remote://ssh-remote%2Bana%3A{v}%40build-host/srv"),
        ("url query", lambda v: f"GET https://api.example.com/v1/items?limit=10&access_token={v}"),
        ("shell default", lambda v: f"      - DB_PASSWORD=${{DB_PASSWORD:-{v}}}"),
        ("env line PGPASSWORD", lambda v: f"export PGHOST=db\nexport PGPASSWORD={v}\n"),
        ("xml appSettings", lambda v: f'<appSettings>\n  <add key="ApiKey" value="{v}" />\n</appSettings>'),
        ("quoted words", lambda v: f'password = "my {v} pass"'),
        ("cli flag quoted", lambda v: f"deploy --api-key 'ab {v}' --prod"),
        ("quote never closed", lambda v: f'DB_PASSWORD="{v}'),
        ("line break written out", lambda v: f'print("user: ana\\npassword: {v}\\n")'),
        ("docker env option", lambda v: f"docker run -d -e POSTGRES_PASSWORD={v} -p 5432:5432 postgres:16"),
        ("command env prefix", lambda v: f"PGPASSWORD={v} psql -h db -U app -c 'select 1'"),
        ("option setting a name", lambda v: f"kubectl create secret generic db --from-literal=password={v}"),
        (".npmrc", lambda v: f"registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken={v}\n"),
        ("kubernetes env list", lambda v: f"    env:\n      - name: DB_PASSWORD\n        value: \"{v}\"\n"),
        ("maven settings.xml", lambda v: f"<server>\n  <id>internal</id>\n  <password>{v}</password>\n</server>"),
        ("python triple quotes", lambda v: f'SECRET_KEY = """{v}"""'),
        # a sixth round: commands that take a password their own way, settings set by a command, an environment
        # indexed by name, a call's arguments, .netrc, R, Java properties, Gradle, a token as a URL's user
        ("sshpass", lambda v: f"sshpass -p '{v}' ssh deploy@build-host"),
        ("mysql -p", lambda v: f"mysql -h db -u root -p'{v}' app < dump.sql"),
        ("docker login -p", lambda v: f"docker login -u ana -p {v} registry.example.com"),
        ("openssl pass:", lambda v: f"openssl pkcs12 -export -in c.pem -out c.p12 -passout pass:{v}"),
        ("htpasswd -b", lambda v: f"htpasswd -cb /etc/nginx/.htpasswd admin {v}"),
        ("ssh-keygen -N", lambda v: f"ssh-keygen -t ed25519 -f deploy_key -N '{v}'"),
        ("gh secret set", lambda v: f"gh secret set DEPLOY_KEY --body '{v}' --repo ana/app"),
        ("aws configure set", lambda v: f"aws configure set aws_secret_access_key {v} --profile prod"),
        ("npm config set", lambda v: f"npm config set //registry.npmjs.org/:_authToken {v}"),
        ("setx", lambda v: f"setx GITHUB_TOKEN {v}"),
        ("git config", lambda v: f"git config --global github.token {v}"),
        ("os.environ indexed", lambda v: f'os.environ["OPENAI_API_KEY"] = "{v}"'),
        ("process.env indexed", lambda v: f"process.env['DB_PASSWORD'] = '{v}';"),
        ("call arguments", lambda v: f'[Environment]::SetEnvironmentVariable("API_KEY", "{v}", "User")'),
        ("getenv default", lambda v: f'token = os.getenv("SERVICE_TOKEN", "{v}")'),
        (".netrc", lambda v: f"machine api.heroku.com\n  login ana@example.com\n  password {v}\n"),
        ("R assignment", lambda v: f'api_key <- "{v}"'),
        ("java property", lambda v: f"java -Dpassword={v} -jar app.jar"),
        ("gradle signing", lambda v: f'signingConfigs {{\n  release {{\n    storePassword "{v}"\n  }}\n}}'),
        ("requests auth", lambda v: f"requests.get(url, auth=('ana', '{v}'))"),
        ("xml setting text", lambda v: f'<Setting name="ClientSecret">{v}</Setting>'),
        ("typescript escaped", lambda v: json.dumps(f'let token: string = "{v}";')),
        # a seventh round: more commands that take a password their own way, .NET and PowerShell credentials,
        # ODBC's PWD, Spring's default
        ("az login -p", lambda v: f"az login --service-principal -u http://app -p {v} --tenant corp"),
        ("mongosh -p", lambda v: f"mongosh -u admin -p '{v}' --authenticationDatabase admin"),
        ("redis-cli -a", lambda v: f"redis-cli -h cache -a '{v}' ping"),
        ("sqlcmd -P", lambda v: f"sqlcmd -S db -U sa -P '{v}' -Q 'select 1'"),
        ("twine -p", lambda v: f"twine upload -u __token__ -p '{v}' dist/*"),
        ("nuget push -k", lambda v: f"dotnet nuget push app.nupkg -k '{v}' -s nuget.org"),
        ("smbclient user%password", lambda v: f"smbclient //fileserver/share -U 'ana%{v}'"),
        ("net use", lambda v: f"net use Z: \\\\fileserver\\share '{v}' /user:corp\\ana"),
        ("cargo login", lambda v: f"cargo login '{v}'"),
        ("ConvertTo-SecureString", lambda v: f"$p = ConvertTo-SecureString '{v}' -AsPlainText -Force"),
        ("NetworkCredential", lambda v: f'var c = new NetworkCredential("ana", "{v}");'),
        ("odbc PWD", lambda v: f"Driver={{ODBC Driver 18 for SQL Server}};Server=db;UID=sa;PWD={v};"),
        ("spring default", lambda v: f"spring.datasource.password=${{DB_PASSWORD:{v}}}"),
        # an eighth round: directory, Windows, cloud and database administration
        ("curl proxy credentials", lambda v: f"curl -U proxy:{v} https://example.com"),
        ("ldapsearch -w", lambda v: f"ldapsearch -x -D 'cn=admin,dc=example' -w '{v}' -b dc=example"),
        ("keytool -storepass", lambda v: f"keytool -genkey -keystore app.jks -storepass '{v}' -keypass '{v}'"),
        ("psexec -p", lambda v: f"psexec \\\\build01 -u admin -p '{v}' cmd"),
        ("net user", lambda v: f"net user ana '{v}' /add"),
        ("az keyvault secret set", lambda v: f"az keyvault secret set --vault-name kv --name db --value '{v}'"),
        ("ssm SecureString", lambda v: f"aws ssm put-parameter --name /db/pw --type SecureString --value '{v}'"),
        ("nmcli password", lambda v: f"nmcli dev wifi connect HomeNet password '{v}'"),
        ("htpasswd -nb", lambda v: f"htpasswd -nb ana '{v}'"),
        ("dotnet user-secrets", lambda v: f'dotnet user-secrets set "ApiKey" "{v}"'),
        ("redis requirepass", lambda v: f"requirepass {v}"),
        ("rabbitmqctl add_user", lambda v: f"rabbitmqctl add_user ana '{v}'"),
        ("chpasswd", lambda v: f"echo 'ana:{v}' | sudo chpasswd"),
        ("sql create user", lambda v: f"CREATE USER app WITH PASSWORD '{v}';"),
        ("sql identified by", lambda v: f"ALTER USER app IDENTIFIED BY '{v}';"),
        ("sql set password", lambda v: f"SET PASSWORD FOR 'app'@'%' = PASSWORD('{v}');"),
        ("smtplib login", lambda v: f"server.login('ana@example.com', '{v}')"),
        ("rclone config", lambda v: f"rclone config create r2 s3 secret_access_key '{v}'"),
        # a ninth round: archives, Perforce, Oracle, lftp, Cassandra, WordPress
        ("7z -p", lambda v: f"7z a -p'{v}' backup.7z src"),
        ("zip -P", lambda v: f"zip -P '{v}' secret.zip notes.txt"),
        ("openssl enc -k", lambda v: f"openssl enc -aes256 -k '{v}' -in notes.txt -out notes.enc"),
        ("p4 -P", lambda v: f"p4 -u ana -P '{v}' sync"),
        ("sqlplus user/password", lambda v: f"sqlplus system/{v}@orcl @setup.sql"),
        ("lftp -u user,password", lambda v: f"lftp -u 'ana,{v}' sftp://files.example.com"),
        ("cqlsh -p", lambda v: f"cqlsh -u app -p '{v}' db.example.com"),
        ("wordpress define", lambda v: f"define( 'AUTH_KEY', '{v}' );"),
        # a tenth round: JSON objects that pair a name with a value, as text (a tool's output)
        ("json name/value pair", lambda v: json.dumps({"env": [{"name": "API_TOKEN", "value": v}]}, indent=2)),
        ("har header", lambda v: json.dumps({"headers": [{"name": "X-Api-Key", "value": v}]})),
        ("cloudformation parameter", lambda v: json.dumps([{"ParameterKey": "DbPassword", "ParameterValue": v}])),
        # an eleventh round: a secret written to a command that reads one from its input, a Terraform variable's
        # default, rabbitmqadmin, doctl, MinIO's client
        ("echo | --password-stdin", lambda v: f"echo '{v}' | docker login ghcr.io -u ana --password-stdin"),
        ("printf | sudo -S", lambda v: f"printf '%s\\n' '{v}' | sudo -S systemctl restart app"),
        ("here-string --with-token", lambda v: f"gh auth login --with-token <<< '{v}'"),
        ("here-string sudo -S", lambda v: f"sudo -S <<< '{v}' apt-get update"),
        ("echo | kinit", lambda v: f"echo '{v}' | kinit ana@EXAMPLE.COM"),
        ("terraform variable default", lambda v: f'variable "db_password" {{\n  type = string\n  default = "{v}"\n}}'),
        ("rabbitmqadmin -p", lambda v: f"rabbitmqadmin -u ana -p '{v}' list queues"),
        ("doctl auth init -t", lambda v: f"doctl auth init -t '{v}'"),
        ("mc alias set", lambda v: f"mc alias set s3 https://s3.example.com ana-access '{v}'"),
        # .pgpass lines, and a YAML value on the line after its key or in a block scalar
        (".pgpass", lambda v: f"cat ~/.pgpass\ndb.example.com:5432:app:ana:{v}\n"),
        (".pgpass", lambda v: f"*:*:*:postgres:{v}"),
        ("yaml next line", lambda v: f"database:\n  password:\n    {v}\n  user: app\n"),
        ("yaml block scalar", lambda v: f"stringData:\n  api-token: |\n    {v}\n"),
        # a twelfth round: package managers' stored credentials, keys given to signing code, a setting's default
        ("poetry http-basic", lambda v: f"poetry config http-basic.private ana '{v}'"),
        ("composer http-basic", lambda v: f"composer config --global http-basic.repo.example.com ana '{v}'"),
        ("bundle config", lambda v: f"bundle config set --global rubygems.pkg.github.com ana:{v}"),
        ("cargo login --registry", lambda v: f"cargo login --registry private '{v}'"),
        ("jwt.encode key", lambda v: f"jwt.encode(payload, '{v}', algorithm='HS256')"),
        ("hmac key", lambda v: f"hmac.new(b'{v}', body, hashlib.sha256).hexdigest()"),
        ("setting default", lambda v: f"SECRET_KEY = env('DJANGO_SECRET_KEY', default='{v}')"),
        ("gcloud secrets <<<", lambda v: f"gcloud secrets versions add db-password --data-file=- <<< '{v}'"),
    ]
    for place, make in named:
        for _ in range(5):
            value = _password(rng) if place != "bearer" else _r(rng, 32, _ALNUM + "-._~+/")
            if place.startswith("url"):  # in a URL, as a URL writes it
                value = quote(value, safe="")
            cases.append(Case("secret_value", place, make(value), value))
    for _ in range(5):  # a token as a URL's user, no password (a GitHub OAuth token: 40 hex digits)
        value = _r(rng, 40, "0123456789abcdef")
        cases.append(Case("url_token", "git remote", f"git clone https://{value}@github.com/ana/app.git", value))
    # parsed JSON: keys that name secrets, an MCP server's configuration
    structures = [
        ("tool arguments", lambda v: {"url": "https://api.example.com", "password": v, "user": "ana"}),
        ("tool arguments", lambda v: {"apiKey": v, "model": "gpt-4.1"}),
        ("tool arguments", lambda v: {"client_secret": v, "client_id": "app-123"}),
        ("mcp server args", lambda v: {"command": "npx", "args": ["-y", "db-server", "--password", v]}),
        ("mcp server args", lambda v: {"command": "server", "args": ["--api-key", v, "--verbose"]}),
        ("mcp server env", lambda v: {"command": "npx", "env": {"DB_PASSWORD": v, "PATH": "/usr/bin"}}),
        ("mcp server headers", lambda v: {"type": "http", "headers": {"X-API-Key": v}}),
        ("mcp server headers", lambda v: {"type": "sse", "headers": {"Authorization": f"Bearer {v}"}}),
        ("name/value pairs", lambda v: {"environment": [{"name": "DB_PASSWORD", "value": v}]}),
        ("name/value pairs", lambda v: {"values": [{"key": "apiKey", "value": v, "enabled": True}]}),
    ]
    for place, make in structures:
        for _ in range(5):
            value = _password(rng) + _r(rng, 8)
            cases.append(Case("secret_value", place, make(value), value))
    for _ in range(5):  # Docker's config.json: base64 of user:password under a key named `auth` alone
        value = base64.b64encode(f"ana:{_password(rng)}".encode()).decode()
        cases.append(Case("secret_value", "docker config.json", {"auths": {"ghcr.io": {"auth": value}}}, value))
    return cases


def lookalikes() -> list[str]:
    return [line for line in LOOKALIKES.read_text(encoding="utf-8").split("\n") if line]


@dataclass
class Score:
    n_planted: int
    n_found: int
    missed: list[Case]
    n_lookalikes: int
    changed: list[str]
    kinds: int

    @property
    def recall(self) -> float:
        return self.n_found / self.n_planted

    @property
    def precision(self) -> float:
        return self.n_found / (self.n_found + len(self.changed)) if self.n_found + len(self.changed) else 1.0

    def line(self) -> str:
        return (f"recall {self.recall:.1%} ({self.n_found} of {self.n_planted} planted secrets of {self.kinds} kinds), "
                f"precision {self.precision:.1%} ({len(self.changed)} of {self.n_lookalikes} look-alikes changed)")


def measure(redact_text: Callable[[str], str], redact_json: Callable[[object], object] | None = None) -> Score:
    """Score a redactor: a planted secret is found when no part of it 16 characters long (or all of a
    shorter one) is left in the output; a look-alike is a false positive when the output differs."""
    cases = planted()
    missed = []
    for case in cases:
        if isinstance(case.value, str):
            out = redact_text(case.value)
        elif redact_json is not None:
            out = json.dumps(redact_json(case.value))
        else:  # a redactor without a structure walk sees the JSON as text
            out = redact_text(json.dumps(case.value))
        if _left(case.secret, out):
            missed.append(case)
    looks = lookalikes()
    changed = [text for text in looks if redact_text(text) != text]
    return Score(len(cases), len(cases) - len(missed), missed, len(looks), changed,
                 len({c.kind for c in cases} | {c.place for c in cases if c.kind == "secret_value"}))


def _left(secret: str, out: str) -> bool:
    """Whether any stretch of the secret a reader could use is left in ``out``."""
    parts = secret.split("\n")
    for part in parts:
        n = min(16, len(part))
        if any(part[i:i + n] in out for i in range(0, max(1, len(part) - n + 1))):
            return True
    return False
