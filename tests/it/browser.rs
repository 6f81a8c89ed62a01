//! A real headless Chromium driven over WebDriver (Debian's `chromium` + `chromium-driver`, which
//! `.ci/run` installs), for the console's and the web chat's tests. Where the two packages are missing
//! the tests say so and pass, unless `VT_TEST_BROWSER=1` (which `.ci/run` sets) requires them.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// chromedriver on a free loopback port, and a WebDriver session of headless Chromium on it.
pub(crate) struct Browser {
    driver: std::process::Child,
    pub client: Client,
    shots: PathBuf,
    downloads: tempfile::TempDir,
}

impl Drop for Browser {
    /// chromedriver and every Chromium process it started share a process group of their own: the
    /// whole group goes, on every path (a failed assertion too), so no browser outlives the test.
    fn drop(&mut self) {
        let group = nix::unistd::Pid::from_raw(self.driver.id() as i32);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.driver.wait();
    }
}

/// Whether the browser tests must run (`VT_TEST_BROWSER=1`, set by `.ci/run`): then a missing
/// Chromium is a failure; otherwise the tests say what is missing and pass.
pub(crate) fn browser_required() -> bool {
    std::env::var("VT_TEST_BROWSER").is_ok_and(|v| v == "1")
}

fn installed(candidates: &[&str]) -> Option<String> {
    candidates
        .iter()
        .find(|p| Path::new(p).exists())
        .map(|p| (*p).to_owned())
}

impl Browser {
    /// `None` when Chromium or its driver is missing and the browser tests are not required.
    pub(crate) async fn start() -> Option<Self> {
        Self::start_for("console").await
    }

    /// [`Self::start`], its screenshots under `target/tmp/{shots}/`.
    pub(crate) async fn start_for(shots: &str) -> Option<Self> {
        let driver_path = installed(&["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"]);
        let chromium = installed(&["/usr/bin/chromium", "/usr/lib/chromium/chromium"]);
        let (Some(driver_path), Some(chromium)) = (driver_path, chromium) else {
            let missing = "chromium and chromium-driver are not installed (apt-get install chromium chromium-driver; `.ci/run` installs them)";
            assert!(!browser_required(), "VT_TEST_BROWSER=1 but {missing}");
            eprintln!("browser test skipped: {missing}; VT_TEST_BROWSER=1 makes it required");
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let driver = std::process::Command::new(driver_path)
            .process_group(0)
            .arg(format!("--port={port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let url = format!("http://127.0.0.1:{port}");
        let mut ready = false;
        for _ in 0..100 {
            if reqwest::get(format!("{url}/status"))
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(ready, "chromedriver did not answer on {url}");
        let downloads = tempfile::tempdir().expect("downloads");
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".into(), json!("chrome"));
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                         "--window-size=1280,1000", "--lang=pt-BR"],
                "prefs": {
                    "download.default_directory": downloads.path(),
                    "download.prompt_for_download": false,
                },
            }),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&url)
            .await
            .expect("a WebDriver session of headless Chromium");
        let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join(shots);
        std::fs::create_dir_all(&shots).expect("screenshot folder");
        Some(Self {
            driver,
            client,
            shots,
            downloads,
        })
    }

    /// Ends the WebDriver session (Chromium closes) before the driver's group is killed.
    pub(crate) async fn close(self) {
        self.client.clone().close().await.expect("close the session");
    }

    /// Clicks the conversation page's download link and reads the file (the last download of it
    /// replaced first).
    pub(crate) async fn download_transcript(&self, id: &str) -> String {
        let file = self.downloads.path().join(format!("conversa-{id}.yaml"));
        let _ = std::fs::remove_file(&file);
        self.click("#baixar-transcricao").await;
        for _ in 0..100 {
            if let Ok(text) = std::fs::read_to_string(&file)
                && !text.is_empty()
            {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no transcript was downloaded");
    }

    pub(crate) async fn shot(&self, name: &str) {
        let png = self.client.screenshot().await.expect("screenshot");
        std::fs::write(self.shots.join(format!("{name}.png")), png).expect("write screenshot");
    }

    /// The element `css` selects, once it is there (up to 10 s).
    pub(crate) async fn element(&self, css: &str) -> fantoccini::elements::Element {
        self.client
            .wait()
            .at_most(Duration::from_secs(10))
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css}: {e}"))
    }

    pub(crate) async fn text(&self, css: &str) -> String {
        self.element(css).await.text().await.expect("text")
    }

    /// Clicks `css`. The console's live parts (`data-vivo`) are read again when the desk moves, so the
    /// element found may be replaced before the click lands: then it is found again.
    pub(crate) async fn click(&self, css: &str) {
        for _ in 0..5 {
            match self.element(css).await.click().await {
                Ok(()) => return,
                Err(e) if e.to_string().contains("stale element") => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("click {css}: {e}"),
            }
        }
        panic!("click {css}: the element kept being replaced");
    }

    /// Clicks `css`, a form's button, and waits for the page the form leads to.
    pub(crate) async fn submit(&self, css: &str) {
        self.client
            .execute("window.__antes = true", vec![])
            .await
            .expect("mark");
        self.click(css).await;
        for _ in 0..100 {
            let fresh: Value = self
                .client
                .execute(
                    "return window.__antes === undefined && document.readyState === 'complete'",
                    vec![],
                )
                .await
                .unwrap_or(Value::Bool(false));
            if fresh == Value::Bool(true) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("submitting {css} led nowhere");
    }

    pub(crate) async fn type_into(&self, css: &str, text: &str) {
        let field = self.client.find(Locator::Css(css)).await.expect(css);
        field.clear().await.expect("clear");
        field.send_keys(text).await.expect("type");
    }

    pub(crate) async fn path(&self) -> String {
        self.client.current_url().await.expect("url").path().to_owned()
    }

    /// Waits (up to 10 s) for the browser to be on `path`: a click that submits a form returns before
    /// the next page has loaded.
    pub(crate) async fn wait_path(&self, path: &str) {
        for _ in 0..100 {
            if self.path().await == path {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(self.path().await, path);
    }

    pub(crate) async fn sign_in(&self, base: &str, key: &str) {
        self.client
            .goto(&format!("{base}/console"))
            .await
            .expect("sign-in page");
        self.type_into("#chave", key).await;
        self.click("form[action='/console/entrar'] button").await;
    }

    pub(crate) async fn sign_out(&self) {
        self.click("form.sair button").await;
    }

    /// At a phone's width (390 px), whether the page fits: the elements that reach past it, if any.
    pub(crate) async fn past_a_phone(&self) -> Vec<String> {
        let wide: Value = self
            .client
            .execute(
                "if (document.documentElement.scrollWidth <= 390) { return []; }
                 return [...document.querySelectorAll('body *')]
                    .filter(e => e.getBoundingClientRect().right > 391)
                    .filter(e => ![...e.children].some(c => c.getBoundingClientRect().right > 391))
                    .map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right) + 'px: ' + e.outerHTML.slice(0, 80))",
                vec![],
            )
            .await
            .expect("widths");
        serde_json::from_value(wide).unwrap_or_default()
    }

    pub(crate) async fn source(&self) -> String {
        self.client.source().await.expect("source")
    }
}
