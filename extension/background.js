// The toolbar button opens the side panel; the panel is the web app itself (www/index.html).
chrome.sidePanel.setPanelBehavior({ openPanelOnActionClick: true }).catch((error) => console.warn(error));
