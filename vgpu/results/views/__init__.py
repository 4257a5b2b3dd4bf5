"""Results for people: number formatting, the HTML/Markdown report with its charts and
panels, one stored run read back in the terminal. Reads the store and the verdicts."""
