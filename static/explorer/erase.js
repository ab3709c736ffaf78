// The erase confirmation page: the button is enabled once the typed key matches
// (the server checks it too; without JavaScript the form still works).
const input = document.getElementById("erase-confirm");
const button = document.getElementById("erase-submit");
if (input && button) {
  const sync = () => { button.disabled = input.value.trim() !== input.dataset.key; };
  input.addEventListener("input", sync);
  sync();
}
