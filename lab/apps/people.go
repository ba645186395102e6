package apps

import "math/rand/v2"

// person is the sample app's Person data class; Jackson writes its
// properties in constructor order: id, name, age, gender.
type person struct {
	ID     int    `json:"id"`
	Name   string `json:"name"`
	Age    int    `json:"age"`
	Gender string `json:"gender"`
}

// makePeople is the repository's init(): ids 1..n, a full name, a gender
// and an age in [18, 85), drawn from seed, so the same seed gives the same
// persons and different pods (different seeds) differ. The real app asks
// DataFaker for fullName(), binaryTypes() and numberBetween(18, 85), so
// every instance holds different persons; these lists play DataFaker's role.
func makePeople(seed uint64, n int) []person {
	firstNames := [...]string{"Kenton", "Marisol", "Darren", "Anna", "Lisa", "Tom", "Ezekiel", "Gwendolyn", "Rosario",
		"Wilfred", "Shayna", "Lupe", "Dorian", "Ophelia", "Reinaldo", "Tamika", "Jasper", "Linnea", "Bernard", "Yesenia",
		"Cletus", "Marguerite", "Quentin", "Valorie", "Hubert", "Jolene", "Anibal", "Corinne", "Elton", "Frida"}
	lastNames := [...]string{"Hegmann", "Smith", "Hamilton", "Shaw", "Kuhlman", "Bergstrom", "O'Keefe", "Runolfsdottir",
		"Wiśniewska", "Schowalter", "Gutmann", "Lakin", "Feeney", "Ortiz", "Dicki", "Mraz", "Wunsch", "Zboncak", "Haag",
		"Torphy", "Marquardt", "Pacocha", "Quigley", "Rempel", "Sawayn", "Tromp", "Ullrich", "Volkman", "Yundt", "Zulauf"}
	rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	out := make([]person, n)
	for i := range out {
		g := "MALE"
		if rng.IntN(2) == 1 {
			g = "FEMALE"
		}
		out[i] = person{
			ID:     i + 1,
			Name:   firstNames[rng.IntN(len(firstNames))] + " " + lastNames[rng.IntN(len(lastNames))],
			Age:    18 + rng.IntN(85-18),
			Gender: g,
		}
	}
	return out
}
